"""The ``recall`` tool's search mode (docs/observational-memory.md#retrieval): stored messages that
match a query, each shown through the observation group that remembers it.

With ``retrieval.vector`` the memory searches by meaning (the ``SemanticSearch`` port,
``dev_server.kernel.ports``); when it cannot (no embedder, or the embedder failed:
``SemanticSearchUnavailable``), or without ``vector``, the thread store's full-text index
answers instead (``search_messages``): the query as one phrase first, then its words (``keyword_hits``). The result says
which kind answered.

Each hit is reported as the observation group whose range holds its message, when the
log of its thread (or resource) has one: the thread, the group's message range, its id,
the score and the group's observations. A message no group covers yet (recent, or never
observed) is shown itself. Hits in one group are reported once. Only the caller's resource
is searched (only its current thread in thread scope), and the turn's own input is left
out: it would match its own query.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dev_server.kernel.messages import Message, Thread
from dev_server.kernel.ports import ResourceConversations, SemanticSearch, SemanticSearchUnavailable
from dev_server.om.prompting.groups import ObservationGroup, group_of_message, parse_groups
from dev_server.om.retrieval.recall_format import (
    PAGE_TOKENS,
    cut_to_tokens,
    low_detail,
    message_parts,
    render,
    timestamp,
)

if TYPE_CHECKING:
    from dev_server.om.engine.observation_engine import ObservationEngine

DEFAULT_TOP_K = 10
GROUP_BODY_TOKENS = 400
_WORD = re.compile(r"\w{3,}")
_MAX_WORDS = 8


async def keyword_hits(store: ResourceConversations, query: str, *, resource_id: str, thread_id: str | None,
                       limit: int, exclude: Collection[str] = ()) -> list[tuple[Message, float]]:
    """Full-text matches, best first: the whole query as a phrase (score 1); when nothing
    holds the phrase, messages holding some of its words (score: 0.9 times the share of
    words held), newest first among equals."""
    def allowed(message: Message) -> bool:
        return message.id not in exclude

    found: dict[str, tuple[Message, float]] = {}
    for message, _ in await store.search_messages(query.strip(), resource_id=resource_id, thread_id=thread_id,
                                                  limit=limit + len(exclude)):
        if allowed(message):
            found.setdefault(message.id, (message, 1.0))
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:_MAX_WORDS]
    if len(words) > 1 and not found:
        counts: dict[str, int] = {}
        messages: dict[str, Message] = {}
        for word in words:
            for message, _ in await store.search_messages(word, resource_id=resource_id, thread_id=thread_id,
                                                          limit=3 * limit + len(exclude)):
                if allowed(message) and message.id not in found:
                    counts[message.id] = counts.get(message.id, 0) + 1
                    messages[message.id] = message
        for message_id in sorted(counts, key=lambda mid: -counts[mid]):  # stable: newest first among equals
            found[message_id] = (messages[message_id], round(0.9 * counts[message_id] / len(words), 2))
    return list(found.values())[:limit]


@dataclass
class _Lookups:
    """What one search reads more than once: threads, records' groups, range ends."""

    store: ResourceConversations
    engine: ObservationEngine
    resource_id: str
    threads: dict[str, Thread | None] = field(default_factory=dict)
    groups: dict[str, list[ObservationGroup]] = field(default_factory=dict)
    messages: dict[str, Message | None] = field(default_factory=dict)

    async def thread(self, thread_id: str) -> Thread | None:
        if thread_id not in self.threads:
            self.threads[thread_id] = await self.store.get_thread(thread_id)
        return self.threads[thread_id]

    async def message(self, message_id: str) -> Message | None:
        if message_id not in self.messages:
            self.messages[message_id] = await self.store.get_message(message_id)
        return self.messages[message_id]

    async def group_of(self, message: Message) -> ObservationGroup | None:
        key = self.engine.key(message.thread_id, self.resource_id)
        if key not in self.groups:
            record = await self.engine.records.active(key)
            self.groups[key] = parse_groups(record.active_observations) if record else []
        return await group_of_message(self.groups[key], message, self.message)


def _section(number: int, thread: Thread, current: bool, score: float, message: Message,
             group: ObservationGroup | None) -> str:
    marker = " ← current" if current else ""
    lines = [f"### Result {number}", f"- thread: {thread.id} ({thread.title or '(untitled)'}){marker}"]
    if group is not None:
        start, end = group.start, group.end
        lines += [f"- source: messages {start} through {end} (range `{group.range}`; use either id as a cursor)",
                  f"- observation group: {group.id}"]
        body = cut_to_tokens(group.content, GROUP_BODY_TOKENS)
        if body != group.content:
            body += "\n…"
    else:
        lines += [f"- source: message {message.id} ({message.role}, {timestamp(message.created_at)}; "
                  "not in any observation group yet)"]
        body = render(low_detail(message_parts(message)))
    lines += [f"- score: {score:.2f}", "", "```text", body.strip() or "(no text)", "```"]
    return "\n".join(lines)


async def search(store: ResourceConversations, semantic: SemanticSearch, engine: ObservationEngine, *,
                 query: str, resource_id: str,
                 current: Thread, thread_id: str | None, vector: bool, top_k: int | None,
                 exclude: Collection[str] = ()) -> dict[str, Any]:
    """The search result ``{results, count, searchMode[, note]}``; ``thread_id`` limits it
    to one thread (the caller has checked it is the resource's)."""
    limit = min(max(top_k or DEFAULT_TOP_K, 1), 20)
    mode, note = "keyword", None
    hits: list[tuple[Message, float]] | None = None
    if vector:
        try:
            found = await semantic.search(query, resource_id=resource_id, thread_id=thread_id, top_k=limit,
                                          exclude_ids=exclude)
            hits = [(hit.message, hit.score) for hit in found if hit.message.id not in exclude]
            mode = "vector"
        except SemanticSearchUnavailable as exc:
            note = f"Search by meaning is unavailable ({exc}); these are keyword matches instead."
    if hits is None:
        hits = await keyword_hits(store, query, resource_id=resource_id, thread_id=thread_id, limit=limit,
                                  exclude=exclude)
    lookups = _Lookups(store, engine, resource_id, threads={current.id: current})
    sections: list[str] = []
    seen_groups: set[str] = set()
    for message, score in hits:
        thread = await lookups.thread(message.thread_id)
        if thread is None or thread.resource_id != resource_id or (thread_id and thread.id != thread_id):
            continue  # never another resource's (or, limited to one, another thread's) message
        group = await lookups.group_of(message)
        if group is not None:
            if group.id in seen_groups:
                continue
            seen_groups.add(group.id)
        sections.append(_section(len(sections) + 1, thread, thread.id == current.id, score, message, group))
        if len(sections) >= limit:
            break
    result: dict[str, Any] = {"results": cut_to_tokens("\n\n".join(sections), PAGE_TOKENS) if sections
                              else "No matching messages found.", "count": len(sections), "searchMode": mode}
    if note:
        result["note"] = note
    return result
