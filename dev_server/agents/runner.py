"""One agent turn, independent of the wire format it is streamed in.

``prepare`` does everything that can fail cleanly before a response starts: it opens the
thread inside its resource, stores the user's message (so a crash mid-stream cannot lose
it), and builds the model context from storage (tool calls re-fed as ``tool_calls`` +
``tool`` messages). ``run`` drives the step loop (``dev_server.kernel.loop``: model, tools,
results back, up to the agent's ``max_steps``), yields its events (``dev_server.kernel.events``)
and, in a ``finally`` that also runs when the client disconnects, stores the reply with
its parts (text and ``tool-invocation``): complete, or what was generated so far marked
``interrupted``. The gateway (AI SDK stream) and the studio (Mastra chunks) both encode
the same events. One ``model_generation`` span covers the turn, one ``model_step`` span
each step. Routes never call these directly:
``dev_server.agents.turns`` serialises turns on a thread and calls both. ``ask`` runs an agent
for a tool of another agent (agent as tool): no thread, its spans under the tool's.

While the reply streams it is checkpointed (at most once per ``checkpoint_every_s``) as
the same message, marked ``interrupted``, so a process killed mid-stream leaves the
partial reply stored; the final save overwrites the checkpoint. A processor may split the
reply between two steps (``dev_server.agents.reply_so_far``): what it holds is stored as a
message of its own and the reply goes on as a new message, under a new id; the stream stays
one message. Any failure while streaming, not only the provider's, is recorded on the turn
and re-raised as a failure with a ``kind`` and a safe ``message``. Text is repaired (lone surrogates -> U+FFFD) where
it enters the turn, from storage or from the model, so it can always be encoded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span

from dev_server.agents.registry import AgentRegistry, RegisteredAgent
from dev_server.agents.replay import reply_events
from dev_server.agents.reply_so_far import TurnReplySoFar
from dev_server.agents.run_spans import RunSpans, TracedProcessor
from dev_server.kernel import ids
from dev_server.kernel.clock import SYSTEM_CLOCK, Clock, now_iso
from dev_server.kernel.convert import assistant_message
from dev_server.kernel.events import LoopEvent, StepFinish
from dev_server.kernel.loop import ReplyParts, run_steps
from dev_server.kernel.messages import Message, Thread
from dev_server.kernel.model import Finish, LLMClient, ResolvedModel
from dev_server.kernel.processors import Processor, ReplyContext, StepContext, TurnProcessors, start_turn
from dev_server.kernel.stream_errors import INTERNAL_MESSAGE
from dev_server.kernel.text import repair_value
from dev_server.kernel.tools import Tool
from dev_server.llm import ModelProviderError
from dev_server.memory.tool_results import ContinuedReply
from dev_server.memory.turn_rules import TurnIntent
from dev_server.observability import spans

log = logging.getLogger(__name__)

MAX_ASK_DEPTH = 3  # agent asks agent asks agent; a cycle of ask tools stops there
_ASK_DEPTH: ContextVar[int] = ContextVar("ask_depth", default=0)


def new_id(prefix: str = "") -> str:
    return f"{prefix}{ids.uuid4()}"


class TurnFailed(Exception):
    """A turn broke for a reason other than the model provider (a bug, storage); the
    cause is logged, the client only sees ``kind`` and ``message``."""

    kind = "internal"

    def __init__(self, message: str = INTERNAL_MESSAGE) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class Turn:
    agent: RegisteredAgent
    model: ResolvedModel
    step: StepContext  # what each step's model call is built from (dev_server.kernel.processors)
    thread: Thread | None
    resource_id: str | None
    reply_id: str = field(default_factory=new_id)
    run_id: str = field(default_factory=new_id)
    first_step: int = 0  # steps the reply already has: it continues a stored one (client tool output)
    user_message_id: str | None = None
    replay: Message | None = None  # a retried turn's stored reply: told again, no model is called
    processors: tuple[Processor, ...] = ()  # the memory's (dev_server.kernel.processors)
    # filled in while running
    processing: TurnProcessors = field(default_factory=TurnProcessors)  # the processors' turn objects
    reply: ReplyParts = field(default_factory=ReplyParts)
    finish: Finish | None = None
    error: ModelProviderError | TurnFailed | None = None
    interrupted: bool = False
    checkpointed: bool = False  # a partial copy of the reply is stored
    reply_created_at: str | None = None  # the reply's createdAt, once a checkpoint or a processor read it
    not_before: str | None = None  # after a split: the next message's earliest createdAt
    split_text: str = ""  # the text of what was split off the reply (``ReplySoFar.split``)
    # the run's root span, and the context its children hang from
    span: Span = trace.INVALID_SPAN
    trace_context: Context | None = None
    ids: dict[str, str] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)  # when preparing began: the run's log lines time it

    @property
    def text(self) -> str:
        return self.split_text + self.reply.text

    def described(self) -> str:
        """The run as its log lines name it: the agent, the thread, the time so far."""
        where = f"thread {self.thread.id}" if self.thread is not None else "no thread"
        return f"{self.agent.id} on {where}, {(time.monotonic() - self.started) * 1000:.0f} ms"

    def reply_metadata(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"modelId": self.model.model_id, "provider": self.model.provider,
                                    "runId": self.run_id, "agentId": self.agent.id}
        if self.user_message_id is not None:  # the user message this reply answers
            metadata["answers"] = self.user_message_id
        if self.model.is_local:
            metadata["local"] = True
        if self.finish is not None:
            metadata["finishReason"] = self.finish.finish_reason
            metadata["usage"] = {"inputTokens": self.finish.usage.input_tokens,
                                 "outputTokens": self.finish.usage.output_tokens}
        if self.interrupted:
            metadata["interrupted"] = True
        if self.error is not None:
            metadata["error"] = {"kind": self.error.kind, "message": self.error.message}
        return metadata


class TurnRunner:
    def __init__(self, llm: LLMClient, tracer: trace.Tracer | None = None,
                 agents: AgentRegistry | None = None, clock: Clock = SYSTEM_CLOCK, trace_input_chars: int = 0) -> None:
        self.llm = llm
        self.clock = clock  # stamps the replies
        self.tracer = tracer or trace.NoOpTracer()
        self.trace_input_chars = trace_input_chars  # what a generation span keeps of its input (0: all)
        self.agents = agents  # what tools may ask (``ask``); None: no agent as tool

    async def prepare(self, agent: RegisteredAgent, *, thread_id: str | None, resource_id: str,
                      incoming: list[Message], client_context: list[dict[str, Any]],
                      run_id: str | None = None, client_tools: tuple[Tool, ...] = (),
                      parent: Context | None = None, intent: TurnIntent = TurnIntent()) -> Turn:
        """Open the thread and store the turn's input, or use the client's context.

        Memory is used when the agent has it and a thread is named; otherwise nothing is
        stored and the model sees ``client_context``. Starts the run's root span (under
        ``parent`` when another run asked for this one); ``run`` ends it (or this does, if
        preparing fails). ``client_tools`` (a Studio run's own)
        are offered to the model besides the agent's, for this turn only. When the input is
        a client's tool output (``dev_server.memory.tool_results``) the turn continues the stored
        reply it completes instead of starting a new one. ``intent`` (a retry, an edit, a
        regenerate: ``dev_server.memory.turn_rules``) decides what a known message id means; a retry
        whose reply is stored becomes a turn that tells that reply again.
        """
        started = time.monotonic()
        model = await self.llm.resolve(agent.definition.model)
        memory = agent.memory if thread_id is not None else None
        thread_id = thread_id if memory else None
        run_id = run_id or new_id()
        ids = spans.identity(agent_id=agent.id, agent_name=agent.definition.name, run_id=run_id,
                             thread_id=thread_id, resource_id=resource_id if memory else None)
        user_text = _last_user_text(incoming, client_context)
        root = spans.start(self.tracer, f"agent run: '{agent.id}'", "agent_run", ids, input=user_text, parent=parent,
                           attributes={"conversationId": thread_id, "instructions": agent.definition.instructions,
                                       "availableTools": [tool.name for tool in agent.definition.tools]})
        context = trace.set_span_in_context(root)
        try:
            step = StepContext(agent.id, run_id, agent.definition.instructions, thread=None, resource_id=None,
                               agent_tools=(*client_tools, *agent.definition.tools),  # a server tool wins a name
                               llm=self.llm, model=model)
            if memory is None:
                step.history = repair_value(client_context)
                turn = Turn(agent, model, step, thread=None, resource_id=None, run_id=run_id, started=started)
            else:
                with spans.child(self.tracer, "memory: save messages", "memory_operation", ids, context,
                                 input={"messageIds": [m.id for m in incoming]}) as save:
                    thread = await memory.open_thread(thread_id, resource_id)
                    recorded = await memory.record_turn(thread, incoming, intent)
                    spans.set_output(save, {"stored": recorded.stored,
                                            **({"replayed": recorded.replay.id} if recorded.replay else {})})
                step.thread, step.resource_id, step.input_count = thread, resource_id, len(recorded.stored)
                turn = Turn(agent, model, step, thread=thread, resource_id=resource_id,
                            user_message_id=incoming[-1].id, run_id=run_id,
                            processors=memory.processors, started=started)
                if recorded.replay is not None:
                    turn.replay, turn.reply_id = recorded.replay, recorded.replay.id
                elif isinstance(incoming[-1], ContinuedReply):
                    _continue_reply(turn, incoming[-1])
                step.reply = TurnReplySoFar(turn, build=lambda metadata: self._reply(turn, metadata),
                                            stamp=lambda: self._stamp(turn),
                                            store=lambda message: self._store_split(turn, message), new_id=new_id)
        except BaseException as exc:
            spans.finish(root, error=exc)
            raise
        turn.span, turn.trace_context, turn.ids = root, context, ids
        # Logged inside the run's span, with the span's ids as attributes: the log exporter
        # links the record to the trace, the thread and the resource.
        with trace.use_span(root, end_on_exit=False):
            log.info("agent run started: %s", turn.described(), extra=ids)
        return turn

    async def run(self, turn: Turn, *, checkpoint_every_s: float | None = None) -> AsyncIterator[LoopEvent]:
        """The turn's events (``dev_server.kernel.events``); the reply is stored however the stream ends,
        and a ``Finish`` comes only once it is stored.

        With ``checkpoint_every_s``, the partial reply is also stored while streaming,
        whenever that long has passed since the turn's last write.
        """
        if turn.replay is not None:
            async for event in self._replayed(turn):
                yield event
            return
        model = turn.model
        generation = spans.start(self.tracer, f"llm: '{model.model_id}'", "model_generation", turn.ids,
                                 parent=turn.trace_context,
                                 attributes={"model": model.model_id, "provider": model.provider,
                                             "streaming": True, "parameters": {}, "local": model.is_local})
        hooks = RunSpans(self.tracer, turn.ids, generation, self.trace_input_chars)
        turn.step.open_span = hooks.open_span
        definition = turn.agent.definition
        turn.processing = TurnProcessors([TracedProcessor(p, hooks) if p.shapes_steps() else p
                                          for p in start_turn(turn.processors, turn.step)])
        stream = run_steps(self.llm, model, turn.step, turn.processing, definition.max_steps, turn.reply, hooks,
                           ask_agent=self.ask if self.agents is not None else None, clock=self.clock)
        last_write = time.monotonic()  # prepare stored the input just before
        turn.interrupted = True  # until the stream ends on its own
        save_error: Exception | None = None
        try:
            async for event in stream:
                if isinstance(event, Finish):
                    turn.finish = event
                    continue  # passed on once the reply is stored, below
                if (checkpoint_every_s is not None and not isinstance(event, StepFinish)
                      and time.monotonic() - last_write >= checkpoint_every_s):
                    await self._checkpoint(turn)
                    last_write = time.monotonic()
                yield event
            turn.interrupted = False
        except ModelProviderError as exc:
            turn.error, turn.interrupted = exc, False
            raise
        except Exception as exc:
            with trace.use_span(turn.span, end_on_exit=False):
                log.exception("agent run broke while streaming: %s", turn.described(), extra=turn.ids)
            turn.error, turn.interrupted = TurnFailed(), False
            raise turn.error from exc
        finally:
            # Shielded: on a client disconnect this scope is already cancelled, and the
            # reply must still be closed out and saved.
            with anyio.CancelScope(shield=True):
                await stream.aclose()
                self._finish_model_spans(turn, generation, hooks.steps)
                try:
                    self._take_late_parts(turn)
                    if _saves_reply(turn):  # no span for an agent or a turn that stores nothing
                        with spans.child(self.tracer, "memory: save reply", "memory_operation", turn.ids,
                                         turn.trace_context):
                            await self._save_reply(turn)
                except Exception as exc:
                    with trace.use_span(turn.span, end_on_exit=False):
                        log.exception("saving the reply failed", extra=turn.ids)
                    save_error = exc
                self._finish_run(turn)
                turn.step.release()
        if save_error is not None:  # reached only when the stream itself ended cleanly
            raise TurnFailed("The reply could not be saved") from save_error
        if turn.finish is not None:
            # Last, so that a client seeing the turn finish finds its reply stored as finished
            # (a checkpoint before it stored it marked interrupted).
            yield turn.finish

    async def _replayed(self, turn: Turn) -> AsyncIterator[LoopEvent]:
        """A retried turn: the stored reply's events; nothing is stored, no model is called."""
        try:
            for event in reply_events(turn.replay):
                if isinstance(event, Finish):
                    turn.finish = event
                yield event
        finally:
            turn.step.release()
            with trace.use_span(turn.span, end_on_exit=False):
                log.info("agent run answered a retry with the stored reply %s: %s", turn.reply_id, turn.described(),
                         extra=turn.ids)
            spans.finish(turn.span, output={"text": turn.replay.content.get("content", ""), "replayed": True})

    async def ask(self, agent_id: str, question: str, parent: Context | None) -> str:
        """Run ``agent_id`` on ``question`` alone, without a thread (nothing is stored), its
        run a child of ``parent``; its text. What an agent-as-tool calls
        (``dev_server.agents.agent_tools``); a failed run raises, and the tool reports the error."""
        agent = self.agents.get(agent_id) if self.agents is not None else None
        if agent is None:
            raise LookupError(f"there is no agent {agent_id!r}")
        depth = _ASK_DEPTH.get()
        if depth >= MAX_ASK_DEPTH:
            raise RecursionError(f"agents asked each other {depth} deep; {agent_id} was not asked")
        token = _ASK_DEPTH.set(depth + 1)  # the asked run's own tools run inside this task
        try:
            turn = await self.prepare(agent, thread_id=None, resource_id=agent.definition.resource, incoming=[],
                                      client_context=[{"role": "user", "content": question}], parent=parent)
            async with aclosing(self.run(turn)) as events:
                async for _ in events:
                    pass
        finally:
            _ASK_DEPTH.reset(token)
        return turn.text

    def _finish_model_spans(self, turn: Turn, generation: Span, steps: list[Span]) -> None:
        usage = ({"inputTokens": turn.finish.usage.input_tokens, "outputTokens": turn.finish.usage.output_tokens}
                 if turn.finish else None)
        reason = turn.finish.finish_reason if turn.finish else ("error" if turn.error else "other")
        step_attributes = {"stepIndex": max(0, len(steps) - 1), "usage": usage, "finishReason": reason}
        if turn.interrupted:
            step_attributes["interrupted"] = True
        if not steps:  # the model failed before its first event
            steps.append(spans.start(self.tracer, "step: 0", "model_step", turn.ids,
                                     parent=trace.set_span_in_context(generation)))
        spans.finish(steps[-1], attributes=step_attributes, error=turn.error,
                     error_kind=turn.error and turn.error.kind)
        spans.finish(generation, output={"text": turn.text}, error=turn.error,
                     error_kind=turn.error and turn.error.kind,
                     attributes={"model": turn.model.model_id, "provider": turn.model.provider, "streaming": True,
                                 "parameters": {}, "usage": usage, "local": turn.model.is_local})

    def _finish_run(self, turn: Turn) -> None:
        with trace.use_span(turn.span, end_on_exit=False):
            if turn.error is not None:
                log.warning("agent run failed: %s: %s", turn.described(), turn.error.message, extra=turn.ids)
            elif turn.interrupted:
                log.info("agent run interrupted by the client: %s", turn.described(), extra=turn.ids)
            else:
                log.info("agent run finished: %s", turn.described(), extra=turn.ids)
        spans.finish(turn.span, output={"text": turn.text}, error=turn.error,
                     error_kind=turn.error and turn.error.kind)

    @staticmethod
    def _take_late_parts(turn: Turn) -> None:
        # What background work reported since the loop's last look goes into the reply;
        # anything later is kept by the work itself (dev_server.om.engine.buffering.PartSink).
        turn.step.live = False
        for part, durable in turn.step.take_emitted():
            if durable:
                turn.step.keep(part, durable, turn.reply)

    async def _save_reply(self, turn: Turn) -> None:
        """Store the reply (``_saves_reply`` said there is one to store)."""
        await self._keep_on_previous_reply(turn)
        reply = self._reply(turn, turn.reply_metadata())
        done = ReplyContext(turn.agent.id, turn.thread, turn.thread.resource_id, reply,
                            interrupted=turn.interrupted, failed=turn.error is not None,
                            llm=self.llm, model=turn.model)
        await turn.processing.finish(done)
        if turn.checkpointed:
            await turn.agent.memory.upsert_reply(turn.thread, reply)
        else:
            await turn.agent.memory.save_reply(turn.thread, reply)

    async def _store_split(self, turn: Turn, message: Message) -> None:
        """A part split off the reply (``TurnReplySoFar``): the first step's parts meant for
        the thread's previous reply go there first, before this message becomes its newest."""
        if turn.thread is None or turn.agent.memory is None:
            return
        await self._keep_on_previous_reply(turn)
        await turn.agent.memory.split_reply(turn.thread, message)

    @staticmethod
    async def _keep_on_previous_reply(turn: Turn) -> None:
        """Write the first step's durable parts onto the thread's previous reply
        (``StepContext.keep``) before this reply is stored; a thread with no reply yet keeps
        them at the head of this one."""
        parts, turn.step.for_previous_reply = turn.step.for_previous_reply, []
        if not parts or turn.thread is None or turn.agent.memory is None:
            return
        kept = ReplyParts()
        for part in parts:
            kept.add_data(part)
        if kept.parts and not await turn.agent.memory.add_to_previous_reply(turn.thread, kept.parts):
            turn.reply.parts[:0] = kept.parts

    async def _checkpoint(self, turn: Turn) -> None:
        """Store the reply so far, marked interrupted until the final save says otherwise.
        A failed checkpoint costs only durability, never the stream: logged and skipped."""
        if turn.thread is None or turn.agent.memory is None:
            return
        metadata = {**turn.reply_metadata(), "interrupted": True}
        turn.reply_created_at = turn.reply_created_at or self._stamp(turn)
        try:
            await self._keep_on_previous_reply(turn)
            await turn.agent.memory.upsert_reply(turn.thread, self._reply(turn, metadata))
            turn.checkpointed = True
        except Exception as exc:
            log.warning("checkpoint of the reply failed: %s", exc, extra=turn.ids)

    def _reply(self, turn: Turn, metadata: dict[str, Any]) -> Message:
        thread = turn.thread or Thread("", "")
        return assistant_message(turn.reply_id, thread.id, turn.resource_id or thread.resource_id,
                                 turn.reply.snapshot(), turn.reply_created_at or self._stamp(turn), metadata)

    def _stamp(self, turn: Turn) -> str:
        """Now, but never before what a split left (a still clock must not tie them)."""
        now = now_iso(self.clock)
        return max(now, turn.not_before) if turn.not_before else now


def _saves_reply(turn: Turn) -> bool:
    """Whether the turn stores a reply: it has a thread and a memory, and the model made
    something or the turn ended on its own (the user's message is stored either way)."""
    if turn.thread is None or turn.agent.memory is None:
        return False
    return not (turn.reply.empty and (turn.interrupted or turn.error))


def _continue_reply(turn: Turn, reply: Message) -> None:
    """The turn goes on in ``reply`` (stored, its client tool calls answered): same id, its
    parts first, saved over it."""
    parts = reply.content.get("parts") or []
    turn.reply_id, turn.user_message_id = reply.id, None
    turn.reply = ReplyParts(parts=[dict(p) for p in parts])
    turn.first_step = turn.reply.steps
    turn.checkpointed, turn.reply_created_at = True, reply.created_at


def _last_user_text(incoming: list[Message], client_context: list[dict[str, Any]]) -> str:
    for message in reversed(incoming):
        if message.role == "user":
            return message.content.get("content", "")
    for message in reversed(client_context):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return ""
