"""Thread titles from the model (``MemoryOptions.generate_title``, Mastra's ``generateTitle``).

A processor that takes part at the reply's ``finish``: once a reply is finished on a thread
that has no title yet (empty, or a ``New Thread ...`` placeholder), it queues one background job per thread
(``title:<thread id>``, ``dev_server.background``) and returns at once, so the reply never waits.
The job asks the agent's own model for a short title of the thread's first user message
(the instructions below follow the structure of Mastra's: what to summarise, a length
bound, no quotes or colons, the whole answer is the title), cleans the answer (reasoning
tags, quotes, line breaks, length) and writes it with ``set_title``, which only titles a
thread that still exists in the same resource and still has no title: a deleted
thread is not re-created, a title set meanwhile (by a user or an earlier job) is kept. A
failure is logged by the background work and forgotten; the next reply on an untitled
thread tries again. The built-in local model answers this request with the first words
of the message (``dev_server.llm.local_model``).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from dev_server.kernel.convert import flat_text
from dev_server.kernel.messages import Message
from dev_server.kernel.model import LLMClient, ModelRequest, ResolvedModel, TextDelta
from dev_server.kernel.processors import ReplyContext, StepContext, TurnProcessor

if TYPE_CHECKING:
    from dev_server.kernel.ports import BackgroundJobs, ThreadMessages, ThreadTitles

log = logging.getLogger(__name__)

DEFAULT_TITLE_PREFIX = "New Thread"
MAX_TITLE_CHARS = 80
_MAX_INPUT_CHARS = 2000  # the first message is the topic; its tail adds nothing to a title

TITLE_INSTRUCTIONS = """Write a short title for a conversation, from the first message its user sent.
- Summarise what the user's message is about; do not answer it.
- Keep it under 80 characters.
- Use no quotes and no colons.
- Reply with the title only: your whole reply becomes the title."""

_THINKING = re.compile(r"<think>.*?</think>", re.S | re.I)


def untitled(title: str | None) -> bool:
    return not title or title.startswith(DEFAULT_TITLE_PREFIX)


def clean_title(text: str) -> str:
    """The model's answer as a title: no reasoning, quotes, colons or line breaks, bounded."""
    text = _THINKING.sub("", text)
    text = " ".join(text.replace(":", " ").split()).strip().strip("\"'`“”‘’").strip()
    if len(text) > MAX_TITLE_CHARS:
        text = text[: MAX_TITLE_CHARS - 1].rstrip() + "…"
    return text


async def ask_for_title(llm: LLMClient, model: ResolvedModel, first_message: str) -> str:
    request = ModelRequest(model=model, messages=[{"role": "system", "content": TITLE_INSTRUCTIONS},
                                                  {"role": "user", "content": first_message[:_MAX_INPUT_CHARS]}],
                           max_tokens=60)
    stream = llm.stream(request)
    pieces: list[str] = []
    try:
        async for event in stream:
            if isinstance(event, TextDelta):
                pieces.append(event.text)
    finally:
        await stream.aclose()
    return clean_title("".join(pieces))


async def first_user_message(threads: ThreadMessages, thread_id: str) -> Message | None:
    messages, _ = await threads.page_messages(thread_id, per_page=1, direction="ASC", roles=["user"])
    return messages[0] if messages else None


async def set_title(titles: ThreadTitles, thread_id: str, resource_id: str, title: str) -> bool:
    """Give the thread its generated title, only if it still exists in ``resource_id``
    and still has none (``untitled``); True when it was written. One conditional UPDATE,
    so a thread deleted or renamed meanwhile is left alone, never re-created."""
    return await titles.set_title_if_untitled(thread_id, resource_id, title, DEFAULT_TITLE_PREFIX)


class TitleGenerator(TurnProcessor):
    """Stateless: its own turn object."""

    name = "title"

    def __init__(self, store: ThreadTitles, background: BackgroundJobs) -> None:
        self.store = store
        self.background = background

    def start_turn(self, step: StepContext) -> TitleGenerator:
        return self

    async def finish(self, done: ReplyContext) -> None:
        if done.failed or done.llm is None or done.model is None or not untitled(done.thread.title):
            return
        thread_id, resource_id = done.thread.id, done.resource_id
        llm, model = done.llm, done.model

        async def job() -> None:
            await self.write_title(llm, model, thread_id, resource_id)

        self.background.submit(f"title:{thread_id}", job)

    async def write_title(self, llm: LLMClient, model: ResolvedModel, thread_id: str, resource_id: str) -> None:
        thread = await self.store.get_thread(thread_id)
        if thread is None or thread.resource_id != resource_id or not untitled(thread.title):
            return  # deleted, moved, or titled since the reply: nothing to do
        first = await first_user_message(self.store, thread_id)
        text = (first.content.get("content") or flat_text(first.content.get("parts") or [])) if first else ""
        if not text.strip():
            return
        title = await ask_for_title(llm, model, text)
        if not title:
            log.info("the model gave no title for thread %s", thread_id)
            return
        if await set_title(self.store, thread_id, resource_id, title):
            log.info("thread %s titled %r", thread_id, title)
