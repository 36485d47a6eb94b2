"""Server tools: what an agent can do besides talking.

A ``Tool`` is a name, a description, a pydantic input model (its JSON schema is what the
model is shown, through litellm's OpenAI function calling) and an async function taking
the validated input and a ``ToolContext`` (who is calling, in which thread, and the trace
context of the call's ``tool_call`` span, for spans of its own). ``execute`` never raises for the tool's own faults: arguments that
are not JSON or do not validate, a function that raises, or one that runs past the tool's
``timeout_s`` all become a ``ToolOutcome`` with ``error`` set, which the loop reports
(``tool-output-error``) and feeds back to the model, and the step goes on.

A tool without a function is a *client tool*: the model may call it, but the client runs
it (useChat's ``addToolResult``, client-js's ``clientTools``), so the loop stops the turn at
its call and the next request carries the output. Client tools a run brings along
(client-js sends ``clientTools`` with JSON schemas) have no pydantic model:
``client_tool`` builds them from the JSON schema they came with.

A tool that needs another agent (agent as tool, ``app.agents.agent_tools``) gets it through
``ToolContext.ask_agent``, which the runner provides: it runs that agent without a thread
under the given trace context and returns its text.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import operator
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from opentelemetry.context import Context
from pydantic import BaseModel, Field, ValidationError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0


# (agent id, question, trace context to run under) -> the agent's answer
AskAgent = Callable[[str, str, Context | None], Awaitable[str]]


@dataclass(frozen=True)
class ToolContext:
    call_id: str
    agent_id: str
    run_id: str
    thread_id: str | None = None
    resource_id: str | None = None
    trace_context: Context | None = None
    ask_agent: AskAgent | None = None


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_model: type[BaseModel] | None = None
    function: Callable[[Any, ToolContext], Awaitable[Any]] | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    schema: dict[str, Any] | None = None  # a client tool's own JSON schema (no input model)

    @property
    def client(self) -> bool:
        return self.function is None

    def json_schema(self) -> dict[str, Any]:
        if self.input_model is not None:
            return json.loads(_schema_json(self.input_model))  # a fresh copy: callers may change it
        return dict(self.schema or {"type": "object", "properties": {}})

    def validate(self, raw: Any) -> Any:
        """The validated input (raises ``ValidationError``); a schema-only tool takes it as is."""
        return self.input_model.model_validate(raw) if self.input_model is not None else raw

    def openai_spec(self) -> dict[str, Any]:
        """The tool as litellm's ``tools=[...]`` entry."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.json_schema()}}


@lru_cache(maxsize=512)
def _schema_json(model: type[BaseModel]) -> str:
    """The input model's JSON schema, generated once: pydantic takes ~150 us per call, and
    the loop offers every tool's schema on every step."""
    return json.dumps(model.model_json_schema())


@dataclass(frozen=True)
class ToolOutcome:
    input: Any  # the parsed arguments (the raw text when they are not JSON)
    output: Any = None
    error: str | None = None


async def execute(tools: dict[str, Tool], name: str, arguments: str, context: ToolContext) -> ToolOutcome:
    """Run one tool call; every fault of the call itself is an outcome, never an exception."""
    try:
        raw = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        return ToolOutcome(arguments, error=f"The arguments are not valid JSON: {exc.msg}")
    tool = tools.get(name)
    if tool is None:
        return ToolOutcome(raw, error=f"Unknown tool {name!r}")
    if tool.function is None:
        return ToolOutcome(raw, error=f"{name} is a client tool: the client runs it, not the server")
    try:
        parsed = tool.validate(raw)
    except ValidationError as exc:
        return ToolOutcome(raw, error=validation_message(name, exc))
    try:
        async with asyncio.timeout(tool.timeout_s):
            output = await tool.function(parsed, context)
    except TimeoutError:
        return ToolOutcome(raw, error=f"The tool {name} did not finish within {tool.timeout_s:g} s")
    except Exception as exc:
        log.info("tool %s failed: %s", name, exc)
        return ToolOutcome(raw, error=f"{type(exc).__name__}: {exc}")
    return ToolOutcome(raw, output=output)


def validation_message(name: str, exc: ValidationError) -> str:
    issues = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
    return f"Invalid arguments for {name}: {issues}"


def client_tool(name: str, description: str, schema: dict[str, Any] | None) -> Tool:
    """A client tool described by a JSON schema (client-js's ``clientTools``)."""
    return Tool(name=name, description=description, schema=schema if isinstance(schema, dict) else None)


# -- the built-in calculator (chat-agent's demonstration tool) -----------------------------

_OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.USub: operator.neg, ast.UAdd: operator.pos,
}


class CalculatorInput(BaseModel):
    expression: str = Field(description="An arithmetic expression, e.g. '(2 + 3) * 4'", max_length=200)


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponent too large")
        return _OPERATORS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError("only numbers and + - * / // % ** are allowed")


async def _calculate(args: CalculatorInput, _: ToolContext) -> dict[str, Any]:
    try:
        tree = ast.parse(args.expression, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {args.expression!r}") from exc
    return {"expression": args.expression, "result": _evaluate(tree)}


calculator = Tool(name="calculator", description="Evaluate an arithmetic expression exactly.",
                  input_model=CalculatorInput, function=_calculate, timeout_s=2.0)


# -- a client tool (chat-agent's demonstration: the browser knows where the user is) ------


class UserLocationInput(BaseModel):
    reason: str = Field("", description="Why the location is needed, shown to the user", max_length=200)


get_user_location = Tool(name="getUserLocation",
                         description="Ask the user's browser for their location (runs in the client).",
                         input_model=UserLocationInput)
