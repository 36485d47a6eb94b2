"""Processors: what builds each step's model context, and what sees the finished reply.

The step loop (``dev_server.kernel.loop``) owns steps and tool calls; it knows no memory feature.
Before every model call it resets the step's system messages (the agent's instructions)
and tools (the agent's own), then runs each *input processor* on one ``StepContext``, in
order: the history window loads the thread's messages, working memory adds its system
message and its update tool, and later semantic recall and Observational Memory add
theirs. The model then gets ``StepContext.messages()`` and the tools in
``StepContext.tools``. The context lives for the whole turn, so a processor may keep
what it loaded on step 0 (``history``) or per-turn scratch in ``state``; only ``system``
and ``tools`` start over each step.

A processor may also ``emit`` data parts (``data-om-status``, observation markers): the
loop streams them once the step's model answered, and keeps the ``durable`` ones in the
reply's stored parts, ahead of the step. Background work a processor started (buffered
observation) may emit too while the turn is ``live``: what arrives after the last step is
streamed before the turn's finish and kept in the reply. ``llm`` and ``model`` are what answers the turn
(a processor that asks a model itself, Observational Memory's observer, starts from them);
``open_span`` opens a span under the processor's own, so such a call shows in the trace.

*Output processors* see the finished reply (``ReplyContext``) before it is saved: they
may add metadata to it or queue background work (a title), but must not block the reply
for long. A memory provides its processors (``Memory.input_processors``); an agent
without memory gets none, and the model sees the client's messages.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from dev_server.kernel.events import DataPart
from dev_server.kernel.tools import Tool
from dev_server.kernel.model import LLMClient, ResolvedModel
from dev_server.kernel.messages import Message, Thread


SpanOpener = Callable[..., AbstractContextManager[Any]]


def no_span(name: str, span_type: str, **kwargs: Any) -> AbstractContextManager[Any]:
    return nullcontext(None)


@dataclass
class StepContext:
    agent_id: str
    run_id: str
    instructions: str
    thread: Thread | None
    resource_id: str | None
    agent_tools: tuple[Tool, ...] = ()
    input_count: int = 1  # messages this turn stored (0: the client re-submitted its last one)
    index: int = 0
    system: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)  # model messages of the thread
    window: list[Message] = field(default_factory=list)  # the stored messages ``history`` was built from
    progress: list[dict[str, Any]] = field(default_factory=list)  # this turn's tool rounds so far
    tools: dict[str, Tool] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)  # processors' per-turn scratch, by name
    llm: LLMClient | None = None
    model: ResolvedModel | None = None
    open_span: SpanOpener = no_span  # (name, span_type, input=, attributes=) -> span context manager
    emitted: list[tuple[DataPart, bool]] = field(default_factory=list)  # (part, durable), this step's
    live: bool = True  # the turn still streams: background work started by it may still emit into it

    def emit(self, part: DataPart, *, durable: bool = False) -> None:
        self.emitted.append((part, durable))

    def take_emitted(self) -> list[tuple[DataPart, bool]]:
        emitted, self.emitted = self.emitted, []
        return emitted

    def begin_step(self, index: int) -> None:
        self.index = index
        self.system = [{"role": "system", "content": self.instructions}]
        self.tools = {tool.name: tool for tool in self.agent_tools}

    def release(self) -> None:
        """The turn is over: drop what it loaded (the history, the processors' state). The
        runner's span hooks and this context refer to each other, so without this a turn's
        whole window would wait for the cyclic garbage collector (full collections of 100+ ms
        on a long thread, measured) instead of being freed at once."""
        self.live = False
        self.system, self.history, self.progress, self.emitted, self.window = [], [], [], [], []
        self.state.clear()
        self.tools = {}
        self.open_span = no_span

    def add_tool(self, tool: Tool) -> None:
        self.tools[tool.name] = tool

    def messages(self) -> list[dict[str, Any]]:
        return [*self.system, *self.history, *self.progress]


class InputProcessor(Protocol):
    name: str

    async def process_step(self, step: StepContext) -> None:
        """Shape ``step`` for its model call (messages, system, tools)."""


@dataclass
class ReplyContext:
    agent_id: str
    thread: Thread
    resource_id: str
    reply: Message
    interrupted: bool = False
    failed: bool = False
    llm: LLMClient | None = None  # what answered, for a processor that asks the model itself (titles)
    model: ResolvedModel | None = None


class OutputProcessor(Protocol):
    name: str

    async def process_reply(self, done: ReplyContext) -> None:
        """See (and possibly annotate) the reply before it is saved."""
