"""Processors: what takes part in every step of a turn, and what sees the finished reply.

The step loop (``dev_server.kernel.loop``) owns steps and tool calls; it knows no memory
feature. A memory gives the runner its ``Processor``s; for each turn the runner asks every
one for its ``TurnProcessor`` (``start_turn``), the object that holds what that processor
keeps for the turn (the history it loaded, the document it read, what Observational
Memory decided): per-turn state belongs to the processor, not to a shared dictionary.
The loop sees the turn's processors as one (``TurnProcessors``) and calls their moments in
order, each a no-op unless the processor overrides it (pydantic-ai's capabilities,
Mastra's ``processInputStep`` / ``processOutputStep``):

* ``before_step(step)``, before every model call, after the loop reset the step's system
  messages (the agent's instructions) and tools (the agent's own): the history window
  loads the thread's messages, working memory adds its system message and its update tool,
  semantic recall and Observational Memory add theirs. The model then gets
  ``StepContext.messages()`` and the tools in ``StepContext.tools``. A processor that loads
  something once per turn does it on its first ``before_step`` and keeps it on its turn
  object; only ``system`` and ``tools`` start over each step.
* ``after_step(step, output)``, after every step the model answered: ``output`` is the
  step's ``StepFinish`` (its text, tool calls and tool results), for a processor that
  persists or seals what a step produced.
* ``finish(done)``, once the reply is finished and before it is saved (``ReplyContext``):
  a processor may add metadata to it or queue background work (a title), but must not
  block the reply for long.

``StepContext.reply`` (``ReplySoFar``, a turn with a thread) is the reply as the earlier steps
left it: its parts, the message it would be stored as now, and ``split``, which stores
that much as a message of its own and lets the reply go on as a new one (Observational
Memory, which may observe or buffer the reply so far in the middle of a turn, as Mastra
does: ``docs/observational-memory.md#decision-order``). The model sees this turn's tool
rounds in ``progress`` until a split; from then on the split-off message is part of the
thread, and the processor that shows the thread (``history``) shows it.

A processor may ``emit`` data parts (``data-om-status``, observation markers): the loop
streams them once the step's model answered, ahead of the step's ``start-step``, and keeps
the ``durable`` ones in the reply's stored parts, ahead of the step, or, for
``PREVIOUS_REPLY`` ones emitted during a new reply's first step, on the thread's previous
reply after its parts (``StepContext.keep``). Background work a processor started (buffered
observation) may emit too while the turn is ``live``: the loop streams (and keeps, the same
way) what arrived at its next pause: right after a step's ``start-step`` (before the model's
first event), after a tool ran (before its result), at the step's end (before its
``finish-step``), or before the turn's finish; never inside a text or reasoning run.
``llm`` and ``model`` are what answers the turn (a processor that asks a model itself,
Observational Memory's observer, starts from them); ``open_span`` opens a span under the
processor's own, so such a call shows in the trace. An agent without memory has no
processors, and the model sees the client's messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from dev_server.kernel.events import PREVIOUS_REPLY, DataPart, Durable, StepFinish
from dev_server.kernel.messages import Message, Thread
from dev_server.kernel.model import LLMClient, ResolvedModel
from dev_server.kernel.tools import Tool

SpanOpener = Callable[..., AbstractContextManager[Any]]


def no_span(name: str, span_type: str, **kwargs: Any) -> AbstractContextManager[Any]:
    return nullcontext(None)


class ReplySoFar(Protocol):
    """The turn's reply before a step: what the earlier steps produced (the runner's)."""

    @property
    def parts(self) -> Sequence[dict[str, Any]]:
        """Its stored parts so far, live (read them, never change them)."""

    def message(self) -> Message | None:
        """The reply so far as it would be stored now (one ``createdAt`` from its first
        reading until it is split); None while it has no parts."""

    async def split(self) -> Message | None:
        """Store the reply so far as a message of its own (the one ``message`` returned) and
        let the reply go on under a new id; the turn's tool rounds in ``progress`` start
        over, since the stored message now holds them. None when there was nothing to store."""


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
    llm: LLMClient | None = None
    model: ResolvedModel | None = None
    open_span: SpanOpener = no_span  # (name, span_type, input=, attributes=) -> span context manager
    emitted: list[tuple[DataPart, Durable]] = field(default_factory=list)  # (part, durable), this step's
    live: bool = True  # the turn still streams: background work started by it may still emit into it
    fresh_reply: bool = True  # the reply started empty (not one continued from stored parts)
    for_previous_reply: list[DataPart] = field(default_factory=list)  # durable parts kept on the reply before
    reply: ReplySoFar | None = None  # the reply so far (a turn with a thread and memory)
    split: bool = False  # the reply so far was split off during this step (``ReplySoFar.split``)

    def keep(self, part: DataPart, durable: Durable, reply: Any) -> None:
        """Keep a durable part where Mastra keeps its markers. A synchronous cycle's go on the
        reply in progress (``reply``: the loop's ``ReplyParts``). ``PREVIOUS_REPLY`` ones
        (buffering, activation: Mastra writes them onto the newest assistant message already
        stored) go, during a fresh reply's first step, onto the thread's previous reply after
        its parts (``for_previous_reply``, written by the runner before it stores this one),
        and so they do during a later step that split the reply (``split``: the newest stored
        reply is the part split off until the next step stores the new one), as do a
        synchronous cycle's when it split the reply before the model answered; otherwise onto
        the reply in progress, which Mastra has stored by then."""
        # streamed transient, stored all the same (in its smaller form when it has one)
        kept = DataPart(part.name, part.data if part.kept_data is None else part.kept_data, part.id)
        if durable == PREVIOUS_REPLY and ((self.fresh_reply and self.index == 0) or self.split):
            self.for_previous_reply.append(kept)
        elif durable is True and self.split and not reply.parts:
            # a later step's synchronous cycle that split the reply: Mastra writes its markers
            # onto the part split off (stored, sealed) before the reply goes on in a new message
            self.for_previous_reply.append(kept)
        else:
            reply.add_data(kept)

    def emit(self, part: DataPart, *, durable: Durable = False) -> None:
        self.emitted.append((part, durable))

    def take_emitted(self) -> list[tuple[DataPart, Durable]]:
        emitted, self.emitted = self.emitted, []
        return emitted

    def begin_step(self, index: int) -> None:
        self.index = index
        self.split = False
        self.system = [{"role": "system", "content": self.instructions}]
        self.tools = {tool.name: tool for tool in self.agent_tools}

    def release(self) -> None:
        """The turn is over: drop what it loaded (the history, the window, the tools). The
        runner's span hooks and this context refer to each other, so without this a turn's
        whole window would wait for the cyclic garbage collector (full collections of 100+ ms
        on a long thread, measured) instead of being freed at once."""
        self.live = False
        self.system, self.history, self.progress, self.emitted, self.window = [], [], [], [], []
        self.for_previous_reply = []
        self.tools = {}
        self.open_span = no_span
        self.reply = None

    def add_tool(self, tool: Tool) -> None:
        self.tools[tool.name] = tool

    def messages(self) -> list[dict[str, Any]]:
        return [*self.system, *self.history, *self.progress]


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


class TurnProcessor:
    """One processor's part in one turn: the moments the loop calls, each a no-op here.
    A processor's turn object overrides the moments it takes part in and keeps, as its own
    attributes, what it carries from one step to the next."""

    name = "processor"

    async def before_step(self, step: StepContext) -> None:
        """Shape ``step`` for its model call (messages, system, tools); may emit parts."""

    async def after_step(self, step: StepContext, output: StepFinish) -> None:
        """See what the step produced (its text, tool calls and results)."""

    async def finish(self, done: ReplyContext) -> None:
        """See (and possibly annotate) the finished reply before it is saved."""

    def shapes_steps(self) -> bool:
        """Whether this turn object takes part before the model calls (the runner traces
        only those: a ``processor_run`` span per step)."""
        return type(self).before_step is not TurnProcessor.before_step


class Processor(Protocol):
    """What a memory assembles: built once, asked for a fresh ``TurnProcessor`` per turn."""

    name: str

    def start_turn(self, step: StepContext) -> TurnProcessor:
        """This processor's part in the turn ``step`` belongs to (``step.thread`` is set)."""


class TurnProcessors(TurnProcessor):
    """A turn's processors as the loop sees them: one object whose moments call each
    processor's, in order."""

    name = "processors"

    def __init__(self, parts: Sequence[TurnProcessor] = ()) -> None:
        self.parts = tuple(parts)

    async def before_step(self, step: StepContext) -> None:
        for part in self.parts:
            await part.before_step(step)

    async def after_step(self, step: StepContext, output: StepFinish) -> None:
        for part in self.parts:
            await part.after_step(step, output)

    async def finish(self, done: ReplyContext) -> None:
        for part in self.parts:
            await part.finish(done)


def start_turn(processors: Iterable[Processor], step: StepContext) -> list[TurnProcessor]:
    """Every processor's turn object for the turn of ``step``, in order."""
    return [processor.start_turn(step) for processor in processors]
