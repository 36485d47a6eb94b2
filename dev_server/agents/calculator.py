"""The built-in calculator (chat-agent's demonstration tool): arithmetic whose work is bounded.

An expression (at most 200 characters) is parsed with ``ast`` and evaluated node by node:
numbers, ``+ - * / // % **`` and unary signs, nothing else. Every intermediate result is
bounded, so no expression can keep a CPU busy: an integer has at most ``MAX_DIGITS`` digits
(under Python's 4,300-digit int-to-str limit, so every result can be written out), a float
is finite, a result is real. ``**`` and ``*`` of two integers are estimated *before* they are
computed (digits of ``a ** b`` ~ ``b * log10(|a|)``, of ``a * b`` at most the sum of both),
since computing them first is what took tens of seconds (``(((9**99)**99)**99)**99``);
``+ - // %`` cannot grow past the bound's next power of ten from bounded operands, and are
checked after. With at most ~100 operations on numbers of at most 4,000 digits, an
evaluation takes well under a millisecond. Any refusal is a ``ValueError``, which the tool
reports as its error (``dev_server.kernel.tools.execute``).

The function is synchronous: ``execute`` runs it in a worker thread under the tool's
deadline, so even it never runs on the event loop.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from dev_server.kernel.tools import Tool, ToolContext

MAX_DIGITS = 4000
_LIMIT = 10**MAX_DIGITS  # an integer result must be below this in magnitude

_OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.USub: operator.neg, ast.UAdd: operator.pos,
}


class CalculatorInput(BaseModel):
    expression: str = Field(description="An arithmetic expression, e.g. '(2 + 3) * 4'", max_length=200)


def _too_many_digits(digits: float | None = None) -> ValueError:
    about = f" (about {digits:,.0f})" if digits is not None else ""
    return ValueError(f"the result would have more than the {MAX_DIGITS:,} digits allowed{about}")


def _estimate(op: ast.operator, left: float | int, right: float | int) -> None:
    """Refuse an integer ``**`` or ``*`` whose result would be over the bound, before computing it."""
    if not (isinstance(left, int) and isinstance(right, int)) or left == 0 or right == 0:
        return
    if isinstance(op, ast.Pow) and right > 0 and abs(left) > 1:
        if right > MAX_DIGITS * 4:  # |left| >= 2: at least right * 0.3 digits (and right may not fit a float)
            raise _too_many_digits()
        digits = right * math.log10(abs(left))
        if digits >= MAX_DIGITS + 1:
            raise _too_many_digits(digits)
    elif isinstance(op, ast.Mult):
        digits = math.log10(abs(left)) + math.log10(abs(right))
        if digits >= MAX_DIGITS + 1:
            raise _too_many_digits(digits)


def _bounded(value: Any) -> float | int:
    """``value`` if it is within the bounds (see the module docstring), else a ``ValueError``."""
    if isinstance(value, complex):
        raise ValueError("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("the result is too large for a number (it overflows to infinity)")
    if isinstance(value, int) and abs(value) >= _LIMIT:
        raise _too_many_digits(math.log10(abs(value)) + 1)
    return value


def evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return _bounded(node.value)  # 1e999 is infinity
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = evaluate(node.left), evaluate(node.right)
        _estimate(node.op, left, right)
        return _bounded(_OPERATORS[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _bounded(_OPERATORS[type(node.op)](evaluate(node.operand)))
    raise ValueError("only numbers and + - * / // % ** are allowed")


def calculate(args: CalculatorInput, _: ToolContext) -> dict[str, Any]:
    try:
        tree = ast.parse(args.expression, mode="eval")
    except SyntaxError as exc:  # also "too many nested parentheses"
        raise ValueError(f"not an arithmetic expression: {args.expression!r}") from exc
    return {"expression": args.expression, "result": evaluate(tree)}


calculator = Tool(name="calculator", description="Evaluate an arithmetic expression exactly.",
                  input_model=CalculatorInput, function=calculate, timeout_s=2.0)
