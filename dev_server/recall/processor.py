"""``semanticRecall``, token tier 2: the stored messages nearest to the user's new message.

A processor of the step loop, after the history window (or Observational Memory): its turn
object (``RecallTurn``) searches once, on the turn's first step, and keeps what it found
(shown again whenever a later step's window is built anew).
As Mastra's ``SemanticRecall``: the query is the text of the last user message of the
turn; the index gives the ``topK`` nearest messages of the thread (scope ``thread``) or of
every thread of the user (``resource``); each comes with
``messageRange`` neighbours of its own thread; whatever the window already holds is left
out. Recalled messages of this thread join the history, oldest first, before the window;
those of other threads (resource scope only) become one system message
(``recall.format``). The turn's resource is the thread's own: under auth the principal's,
so recall never crosses it.

A turn never waits for indexing: what is not embedded yet is simply not found. When the
embedder fails, the turn goes on without recall, and a warning span says why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from dev_server.kernel.convert import to_model_messages
from dev_server.kernel.messages import Message
from dev_server.kernel.ports import SemanticSearch, SemanticSearchUnavailable, ThreadMessages
from dev_server.kernel.processors import StepContext, TurnProcessor
from dev_server.recall.format import other_threads_message, recall_order
from dev_server.recall.options import SemanticRecallOptions
from dev_server.recall.text import message_text

log = logging.getLogger(__name__)


@dataclass
class Recalled:
    messages: list[Message] = field(default_factory=list)  # this thread's, oldest first
    system: str | None = None  # the other threads' excerpts


class RecallTurn(TurnProcessor):
    """What the turn recalled (None until its first step searched)."""

    name = "semantic-recall"

    def __init__(self, processor: SemanticRecallStep) -> None:
        self.processor = processor
        self.recalled: Recalled | None = None
        self.shown: list[dict[str, Any]] | None = None  # the history it last put its messages into

    async def before_step(self, step: StepContext) -> None:
        if step.thread is None:
            return
        if self.recalled is None:
            self.recalled = await self.processor.recall(step)
        # again whenever the window was built anew (Observational Memory may change it at any step)
        if self.recalled.messages and step.history is not self.shown:
            step.history = [*to_model_messages(self.recalled.messages), *step.history]
            self.shown = step.history
        if self.recalled.system:
            step.system.append({"role": "system", "content": self.recalled.system})


class SemanticRecallStep:
    name = "semantic-recall"

    def __init__(self, messages: ThreadMessages, search: SemanticSearch, options: SemanticRecallOptions) -> None:
        self.messages = messages
        self.search = search
        self.options = options

    def start_turn(self, step: StepContext) -> RecallTurn:
        return RecallTurn(self)

    async def recall(self, step: StepContext) -> Recalled:
        thread = step.thread
        assert thread is not None
        query = _last_user_text(step.window)
        if not query:
            return Recalled()
        options = self.options
        window_ids = {m.id for m in step.window}
        try:
            hits = await self.search.search(
                query, resource_id=thread.resource_id, thread_id=thread.id if options.scope == "thread" else None,
                top_k=options.top_k, exclude_ids=window_ids, threshold=options.threshold)
        except Exception as exc:  # recall is an extra: the turn goes on without it
            if not isinstance(exc, SemanticSearchUnavailable):
                log.exception("thread %s: semantic recall failed", thread.id)
            with step.open_span("semantic recall skipped", "generic",
                                attributes={"level": "warning", "reason": str(exc)}):
                pass
            log.warning("thread %s: semantic recall skipped: %s", thread.id, exc)
            return Recalled()
        found: dict[str, Message] = {}
        for hit in hits:
            for message in await self._with_neighbours(hit.message):
                found.setdefault(message.id, message)
        chosen = recall_order([m for m in found.values() if m.id not in window_ids])
        mine = [m for m in chosen if m.thread_id == thread.id]
        others = [m for m in chosen if m.thread_id != thread.id] if options.scope == "resource" else []
        return Recalled(mine, other_threads_message(others, thread.id) if others else None)

    async def _with_neighbours(self, message: Message) -> list[Message]:
        store = self.messages
        before = await store.messages_around(message.thread_id, message.id, after=False,
                                             limit=self.options.before) if self.options.before else []
        after = await store.messages_around(message.thread_id, message.id, after=True,
                                            limit=self.options.after) if self.options.after else []
        return [*(before or []), message, *(after or [])]


def _last_user_text(window: list[Message]) -> str:
    for message in reversed(window):
        if message.role == "user":
            return message_text(message.content)
    return ""

