"""Observational Memory as processors of the step loop (DESIGN.md decision 10).

With OM on, ``ObservationalMemoryStep`` takes the history window's place: on a turn's
first step it reads the active record (created on first use), reflects if the log is over
its threshold, loads the thread's unobserved messages from storage (``app.om.window``) and
counts them (``app.om.tokens``). When they reach ``observation.messageTokens`` (and no tool
call is waiting on its result) the observer runs before the model is called, and the
observed messages leave the window except the turn's own input and the retention floor;
a reflection may follow (``app.om.engine``). Every step then gets, after the agent's
instructions, the observation system messages (``app.om.context``), a continuation
reminder as the first conversation message when there are observations, the remaining
messages, and a transient ``data-om-status`` part; the pending-token count is written to
the record once per turn. Later steps reuse what step 0 loaded: the turn holds the
thread's lease, so nothing else writes it meanwhile (the loop appends its tool rounds).

``TokenEstimates`` is the output processor: it writes each part's token estimate into the
reply before it is saved, so later turns count that reply from the cache (5.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from app.agents.processors import ReplyContext, StepContext
from app.memory.convert import to_model_messages
from app.om.context import build_context_system_messages, continuation_model_message
from app.om.engine import CycleContext, ObservationalMemory
from app.om.parts import status_part
from app.om.tokens import count_message, count_messages
from app.om.window import drop_observed, has_incomplete_tool_calls, unobserved
from app.storage.conversations import Message
from app.storage.om_records import OMRecord, lookup_key, thread_om
from app.streaming.sse import repair_value

if TYPE_CHECKING:
    from app.memory.memory import Memory


@lru_cache(maxsize=32)
def observation_messages(observations: str, today: date, current_task: str | None,
                         suggested_response: str | None) -> tuple[str, ...]:
    """The observation system messages, built once per log and day: a 40k-token log takes
    ~10 ms to optimise and date, and it only changes when an observation or a reflection
    writes it (or the day turns, for its relative dates)."""
    return tuple(build_context_system_messages(observations, now=datetime.combine(today, time(12)),
                                               current_task=current_task, suggested_response=suggested_response))


def local_timezone() -> str:
    return str(datetime.now().astimezone().tzinfo)


@dataclass
class TurnView:
    """What step 0 found, kept for the turn's later steps."""

    record: OMRecord
    messages: list[Message]
    pending_tokens: int
    hints: dict[str, Any]
    system: list[dict[str, Any]] = field(default_factory=list)  # the observation messages, built once


class ObservationalMemoryStep:
    name = "observational-memory"

    def __init__(self, memory: Memory, engine: ObservationalMemory) -> None:
        self.memory = memory
        self.engine = engine

    async def process_step(self, step: StepContext) -> None:
        if step.thread is None:
            return
        view: TurnView | None = step.state.get(self.name)
        if view is None:
            view = await self._first_step(step)
            step.state[self.name] = view
            step.history = repair_value(self._history(view))
            view.system = [{"role": "system", "content": text} for text in observation_messages(
                view.record.active_observations, datetime.now().astimezone().date(),
                view.hints.get("currentTask"), view.hints.get("suggestedResponse"))]
        step.system.extend(view.system)
        step.emit(status_part(self.engine.options, view.record, pending_tokens=view.pending_tokens,
                              step=step.index))

    def _history(self, view: TurnView) -> list[dict[str, Any]]:
        history = to_model_messages(view.messages)
        if view.record.active_observations.strip():
            history.insert(0, continuation_model_message())
        return history

    async def _first_step(self, step: StepContext) -> TurnView:
        thread = step.thread
        assert thread is not None
        options = self.engine.options
        records = self.engine.records
        # a read on every turn; the write that creates generation 0 only on a thread's first
        key = lookup_key(thread.id if options.scope == "thread" else None, thread.resource_id)
        record = await records.active(key) or await records.initialize(
            scope=options.scope, thread_id=thread.id, resource_id=thread.resource_id, config=options.snapshot(),
            timezone=local_timezone())
        ctx = CycleContext(step.llm, step.model, thread.id, thread_om(thread.metadata), step.emit, step.open_span)
        can_ask = step.llm is not None and step.model is not None
        if can_ask:
            record = await self.engine.maybe_reflect(ctx, record)
        stored = await self.memory.store.messages_since(thread.id, record.last_observed_at)
        messages = unobserved(stored, record)
        pending = count_messages(messages)
        threshold = options.message_threshold(record.observation_token_count)
        if can_ask and pending >= threshold and not has_incomplete_tool_calls(messages):
            observed = await self.engine.observe(ctx, record, messages, pending)
            if observed is not None:
                preserve = {m.id for m in messages[-max(1, step.input_count):]}
                messages = drop_observed(messages, {m.id for m in messages}, floor=options.retention_floor(),
                                         preserve=preserve, count=count_message, total=pending)
                record = await self.engine.maybe_reflect(ctx, observed)
                pending = count_messages(messages)
        if record.pending_message_tokens != pending:
            await records.set_pending_message_tokens(record.id, pending)
            record.pending_message_tokens = pending
        return TurnView(record, messages, pending, ctx.hints or {})


class TokenEstimates:
    name = "token-estimates"

    async def process_reply(self, done: ReplyContext) -> None:
        count_message(done.reply)  # fills the per-part cache in place; the reply is saved with it
