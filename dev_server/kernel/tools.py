"""Server tools: what an agent can do besides talking.

A ``Tool`` is a name, a description, a pydantic input model (its JSON schema is what the
model is shown, through litellm's OpenAI function calling) and a function taking the
validated input and a ``ToolContext`` (who is calling, in which thread, and the trace
context of the call's ``tool_call`` span, for spans of its own). ``execute`` never raises
for the tool's own faults: arguments that are not JSON or do not validate, a function that
raises, one that runs past the tool's ``timeout_s``, or an output JSON cannot carry (an
infinity, an integer of thousands of digits: ``dev_server.kernel.json_text``) all become a ``ToolOutcome``
with ``error`` set, which the loop reports (``tool-output-error``) and feeds back to the
model, and the step goes on.

No tool call holds the event loop, where it would stall every request of the
process: a coroutine function is awaited there and must only await (I/O, another agent's
turn); a plain function runs in a thread, or in a child process killed at the deadline
when the tool is marked ``cpu_bound`` (``dev_server.kernel.tool_runs`` says which to choose).

A tool without a function is a *client tool*: the model may call it, but the client runs
it (useChat's ``addToolResult``, client-js's ``clientTools``), so the loop stops the turn at
its call and the next request carries the output. Client tools a run brings along
(client-js sends ``clientTools`` with JSON schemas) have no pydantic model:
``client_tool`` builds them from the JSON schema they came with.

A tool that needs another agent (agent as tool, ``dev_server.agents.agent_tools``) gets it through
``ToolContext.ask_agent``, which the runner provides: it runs that agent without a thread
under the given trace context and returns its text.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from opentelemetry.context import Context
from pydantic import BaseModel, Field, ValidationError

from dev_server.kernel.json_text import unrepresentable
from dev_server.kernel.tool_runs import run_sync

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
    # a coroutine function runs on the event loop; a plain one in a thread, or a child process when cpu_bound
    function: Callable[[Any, ToolContext], Awaitable[Any] | Any] | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    schema: dict[str, Any] | None = None  # a client tool's own JSON schema (no input model)
    cpu_bound: bool = False

    @property
    def client(self) -> bool:
        return self.function is None

    @property
    def on_loop(self) -> bool:
        """Whether the function is a coroutine function, awaited on the event loop."""
        return inspect.iscoroutinefunction(self.function) or inspect.iscoroutinefunction(
            getattr(self.function, "__call__", None))  # noqa: B004 -- reads an async __call__, not a callable test

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
        raw = parse_arguments(arguments)
    except ValueError as exc:
        return ToolOutcome(arguments, error=str(exc))
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
        if tool.on_loop:
            async with asyncio.timeout(tool.timeout_s):
                output = await tool.function(parsed, context)
        else:
            output = await run_sync(tool.function, parsed, context, timeout_s=tool.timeout_s,
                                    cpu_bound=tool.cpu_bound, name=name)
    except TimeoutError:
        return ToolOutcome(raw, error=f"The tool {name} did not finish within {tool.timeout_s:g} s")
    except Exception as exc:
        log.info("tool %s failed: %s", name, exc)
        return ToolOutcome(raw, error=f"{type(exc).__name__}: {exc}")
    problem = unrepresentable(output)
    if problem is not None:
        return ToolOutcome(raw, error=f"The tool {name} returned {problem}, which JSON cannot carry")
    return ToolOutcome(raw, output=output)


def parse_arguments(arguments: str) -> Any:
    """A call's JSON arguments; a ``ValueError`` saying why they cannot be read."""
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"The arguments are not valid JSON: {exc.msg}") from None
    except ValueError:  # Python reads no integer over its int-to-str limit (4,300 digits)
        raise ValueError("The arguments are not valid JSON: they hold an integer too long to read") from None
    except RecursionError:
        raise ValueError("The arguments are not valid JSON: they are nested too deeply") from None


def validation_message(name: str, exc: ValidationError) -> str:
    issues = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
    return f"Invalid arguments for {name}: {issues}"


def client_tool(name: str, description: str, schema: dict[str, Any] | None) -> Tool:
    """A client tool described by a JSON schema (client-js's ``clientTools``)."""
    return Tool(name=name, description=description, schema=schema if isinstance(schema, dict) else None)


# -- a client tool (chat-agent's demonstration: the browser knows where the user is) ------


class UserLocationInput(BaseModel):
    reason: str = Field("", description="Why the location is needed, shown to the user", max_length=200)


get_user_location = Tool(name="getUserLocation",
                         description="Ask the user's browser for their location (runs in the client).",
                         input_model=UserLocationInput)
