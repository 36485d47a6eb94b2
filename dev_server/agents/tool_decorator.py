"""``@dev_server.tool``: a ``Tool`` made from a plain function (Mastra's ``createTool``).

The function's parameters are the tool's input: their annotations and defaults become a
pydantic model (``Annotated[str, Field(description=...)]`` or ``= Field(...)`` describe
one to the model), its name the tool's name, its docstring the description. A parameter
annotated ``ToolContext`` (or ``ToolContext | None``) gets the call's context and is not shown to the model; a
function whose only other parameter is a pydantic model takes the validated model itself
(as ``Tool``'s functions do). A coroutine function is awaited on the event loop; a plain
one runs in a thread, or a child process with ``cpu_bound=True``
(``dev_server.kernel.tool_runs``). Everything is checked when the decorator runs, so a
mistake is raised where the tool is written.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable
from typing import Any, overload

from pydantic import BaseModel, create_model

from dev_server.kernel.tools import DEFAULT_TIMEOUT_S, Tool, ToolContext

# The names dev_server.agents.loading imports a .py file under (it imports this module, not the reverse).
FILE_MODULE_PREFIX = "dev_server_agents_"
# What providers accept as a function name (OpenAI's rule, the strictest of them).
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(*, name: str | None = None, description: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
         cpu_bound: bool = False) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(function: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None,
         timeout_s: float = DEFAULT_TIMEOUT_S, cpu_bound: bool = False) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """``@tool`` or ``@tool(name=..., description=..., timeout_s=..., cpu_bound=...)`` over a
    function: the ``Tool`` it makes (see the module docstring)."""

    def make(fn: Callable[..., Any]) -> Tool:
        return _tool_of(fn, name=name, description=description, timeout_s=timeout_s, cpu_bound=cpu_bound)

    return make(function) if function is not None else make


def _tool_of(fn: Callable[..., Any], *, name: str | None, description: str | None, timeout_s: float,
             cpu_bound: bool) -> Tool:
    if not callable(fn) or isinstance(fn, Tool):
        raise TypeError(f"@tool decorates a function, not a {type(fn).__name__}")
    name = name or getattr(fn, "__name__", "")
    if not TOOL_NAME.match(name):
        raise ValueError(f"tool name {name!r} must be 1-64 letters, digits, '_' or '-'")
    where = f"tool {name!r}"
    description = (description if description is not None else inspect.getdoc(fn) or "").strip()
    if not description:
        raise ValueError(f"{where} needs a description: a docstring, or @tool(description=...)")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
        raise ValueError(f"{where}: timeout_s must be a positive number of seconds, not {timeout_s!r}")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # an annotation that names nothing importable
        raise TypeError(f"{where}: cannot read its annotations: {exc}") from None
    fields: dict[str, Any] = {}
    context_name = None
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
            raise TypeError(f"{where}: parameter {parameter.name!r} must be a plain named parameter")
        annotation = hints.get(parameter.name, Any)
        if _is_context(annotation):
            context_name = parameter.name
            continue
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    only = next(iter(fields.values()))[0] if len(fields) == 1 else None
    if inspect.isclass(only) and issubclass(only, BaseModel):
        input_model, whole = only, True
    else:
        input_model = create_model(f"{_camel(name)}Input", __module__=getattr(fn, "__module__", __name__), **fields)
        # found by name where the decorator put the tool, as pickle looks a class up (cpu_bound: the input
        # crosses to a child process, which imports the function's module to read it)
        input_model.__qualname__ = f"{getattr(fn, '__qualname__', name)}.input_model"
        whole = False
    caller = _AsyncCall if inspect.iscoroutinefunction(fn) else _Call
    return Tool(name=name, description=description, input_model=input_model,
                function=caller(fn, tuple(fields), whole, context_name), timeout_s=float(timeout_s),
                cpu_bound=cpu_bound)


def _is_context(annotation: Any) -> bool:
    """``ToolContext``, or ``ToolContext | None``."""
    if annotation is ToolContext:
        return True
    members = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ()
    return bool(members) and {m for m in members if m is not type(None)} == {ToolContext}


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[_-]", name) if part) or "Tool"


class _Call:
    """Calls the user's function with the validated input spread into its parameters.

    A ``cpu_bound`` tool's call is pickled to its child process by name: the decorator put
    the ``Tool`` where the function was, so the child imports the function's module and
    takes that tool's call (``_call_of``) and its input model (``<function>.input_model``)."""

    def __init__(self, fn: Callable[..., Any], fields: tuple[str, ...], whole: bool, context_name: str | None) -> None:
        self.fn, self.fields, self.whole, self.context_name = fn, fields, whole, context_name

    def __reduce__(self) -> tuple[Any, ...]:
        module = self.fn.__module__
        return _call_of, (module, self.fn.__qualname__, getattr(sys.modules.get(module), "__file__", None))

    def arguments(self, args: BaseModel, context: ToolContext) -> dict[str, Any]:
        given = {self.fields[0]: args} if self.whole else {field: getattr(args, field) for field in self.fields}
        if self.context_name is not None:
            given[self.context_name] = context
        return given

    def __call__(self, args: BaseModel, context: ToolContext) -> Any:
        return self.fn(**self.arguments(args, context))


def _call_of(module: str, qualname: str, path: str | None) -> _Call:
    """The call of the tool named ``qualname`` in ``module`` (the decorated function's place);
    a module of a ``.py`` file given to ``--agents`` (``dev_server.agents.loading``) has a
    name of its own that no import finds, so it is loaded from ``path`` under that name."""
    if module not in sys.modules and path is not None and module.startswith(FILE_MODULE_PREFIX):
        spec = importlib.util.spec_from_file_location(module, path)
        if spec is not None and spec.loader is not None:
            sys.modules[module] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(sys.modules[module])
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found.function if isinstance(found, Tool) else found


class _AsyncCall(_Call):
    async def __call__(self, args: BaseModel, context: ToolContext) -> Any:
        return await self.fn(**self.arguments(args, context))
