"""The ``recall`` tool: the actor reads the messages behind its observations
(docs/observational-memory.md#retrieval).

Offered on every step when ``retrieval`` is on (``dev_server.om.processor``). Three modes:

* ``messages`` (the default): a page of messages from a ``cursor`` (a message id, e.g. an
  end of an observation group's range; ``page`` 1..50 forward, -1..-50 backward), or
  without one from the start or the end of a thread (``anchor``); ``cursor`` +
  ``partIndex`` returns one part whole, read on with ``charOffset``. Shown as
  ``dev_server.om.retrieval.recall_format`` describes, filtered by ``partType`` / ``toolName``.
* ``threads``: the resource's threads, most recently updated first, the current one marked.
* ``search``: ``dev_server.om.retrieval.recall_search`` (by meaning with ``vector``, else by keyword).

Access: everything is read within the turn's resource (the current thread's, which under
auth is the principal's); a thread or message of another resource reads as not found.
With ``retrieval.scope: "thread"`` only the current thread is read: a cursor or thread of
another one is refused, and the thread list holds the current thread alone. Mistakes come
back as ``{"error": ...}`` results the model can act on.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dev_server.kernel.clock import parse_iso
from dev_server.kernel.messages import Message, Thread
from dev_server.kernel.tools import Tool, ToolContext
from dev_server.om.options.config import RetrievalConfig
from dev_server.om.prompting.groups import is_visible
from dev_server.om.retrieval.recall_format import (
    ShownPart,
    low_detail,
    matches,
    message_parts,
    read_chunk,
    read_hint,
    render_page,
    timestamp,
)
from dev_server.om.retrieval.recall_search import search

if TYPE_CHECKING:
    from dev_server.kernel.ports import ResourceConversations, SemanticSearch
    from dev_server.om.engine.observation_engine import ObservationEngine

TOOL_NAME = "recall"
MAX_LIMIT = 20
TIMEOUT_S = 30.0  # a search by meaning may call an embedding provider
PartType = Literal["text", "tool-call", "tool-result", "reasoning", "image", "file"]


class RecallInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["messages", "threads", "search"] = Field(
        "messages", description='"messages" (default) pages through messages; "threads" lists conversation '
                                'threads; "search" finds messages matching a query')
    query: str | None = Field(None, min_length=1, max_length=1000, description='What to look for (mode "search")')
    cursor: str | None = Field(None, min_length=1, max_length=200, description=(
        "A message id to page from: the start or the end of an observation group's range (one id, not the "
        "range), or a message id from an earlier recall result"))
    threadId: str | None = Field(None, min_length=1, max_length=200, description=(
        'A thread to read (mode "messages", without a cursor) or to search in; "current" is this one'))
    anchor: Literal["start", "end"] | None = Field(None, description=(
        'Without a cursor: read the thread from its "start" (default) or back from its "end"'))
    before: str | None = Field(None, max_length=40, description='Mode "threads": created before this date (ISO)')
    after: str | None = Field(None, max_length=40, description='Mode "threads": created after this date (ISO)')
    page: int | None = Field(None, ge=-50, le=50, description=(
        "Messages: 1, 2, ... forward from the cursor, -1, -2, ... backward (0 counts as 1). "
        "Threads: the page number, from 0"))
    limit: int | None = Field(None, ge=1, le=MAX_LIMIT, description="Items per page (default 20)")
    detail: Literal["low", "high"] = Field("low", description=(
        '"low" (default): every part, cut short; "high": one part at a time, whole'))
    partType: PartType | None = Field(None, description="Only parts of this type")
    toolName: str | None = Field(None, min_length=1, max_length=200,
                                 description="Only tool calls and results of this tool")
    partIndex: int | None = Field(None, ge=0, le=10_000, description=(
        "With a cursor: that one part of the cursor's message, whole ([pN] in results)"))
    charOffset: int | None = Field(None, ge=0, description=(
        "With cursor and partIndex: continue a long part from here; pass the nextCharOffset of the last result"))


_DESCRIPTIONS = {
    "resource": ("Read the original messages behind your observations, across all of this user's conversations. "
                 'mode="messages" (default) pages from a cursor (a message id from an observation group\'s range '
                 'or a search result) or reads a thread by threadId; mode="threads" lists the user\'s threads; '
                 'mode="search" finds messages matching a query.'),
    "thread": ("Read the original messages behind your observations in this conversation. mode=\"messages\" "
               "(default) pages from a cursor (a message id from an observation group's range) or from the "
               'start or end of the thread; mode="search" finds messages of this thread matching a query; '
               'mode="threads" shows this thread\'s id and title.'),
}


def _error(message: str) -> dict[str, Any]:
    return {"error": message}


def _other_thread(thread_id: str, caller: Caller) -> dict[str, str]:
    """A page names its thread only when it is not the caller's (Mastra's pages never do, D50)."""
    return {} if thread_id == caller.thread.id else {"threadId": thread_id}


@dataclass(frozen=True)
class Caller:
    """Who asks: the turn's thread, its resource, and this turn's input (not a search hit)."""

    thread: Thread
    resource_id: str
    turn_input: frozenset[str] = frozenset()


class Recall:
    def __init__(self, store: ResourceConversations, semantic: SemanticSearch, engine: ObservationEngine,
                 config: RetrievalConfig) -> None:
        self.store = store
        self.semantic = semantic  # search by meaning (retrieval ``vector``)
        self.engine = engine
        self.config = config

    def tool(self, thread: Thread, turn_input: Collection[str] = ()) -> Tool:
        """The tool of one turn in ``thread``."""
        caller = Caller(thread, thread.resource_id, frozenset(turn_input))

        async def run(args: RecallInput, _: ToolContext) -> dict[str, Any]:
            return await self.run(args, caller)

        return Tool(name=TOOL_NAME, description=_DESCRIPTIONS[self.config.scope], input_model=RecallInput,
                    function=run, timeout_s=TIMEOUT_S)

    async def run(self, args: RecallInput, caller: Caller) -> dict[str, Any]:
        if args.mode == "threads":
            return await self._threads(args, caller)
        target = await self._thread(args.threadId, caller)
        if isinstance(target, dict):
            return target
        if args.mode == "search":
            if not args.query or not args.query.strip():
                return _error('mode "search" needs a query')
            limited = caller.thread.id if self.config.scope == "thread" else (target.id if args.threadId else None)
            return await search(self.store, self.semantic, self.engine, query=args.query,
                                resource_id=caller.resource_id, current=caller.thread, thread_id=limited,
                                vector=self.config.vector,
                                top_k=args.limit, exclude=caller.turn_input)
        if args.cursor:
            return await self._from_cursor(args, caller, target if args.threadId else None)
        if args.partIndex is not None or args.charOffset is not None:
            return _error("partIndex and charOffset need a cursor (the id of the message the part belongs to)")
        return await self._from_anchor(args, caller, target)

    # -- access --------------------------------------------------------------------------

    async def _thread(self, thread_id: str | None, caller: Caller) -> Thread | dict[str, Any]:
        if thread_id in (None, "current", caller.thread.id):
            return caller.thread
        if self.config.scope == "thread":
            return _error(f'Recall is limited to the current thread (retrieval scope "thread"): thread '
                          f'"{thread_id}" cannot be read. Leave threadId out.')
        thread = await self.store.get_thread(thread_id)
        if thread is None or thread.resource_id != caller.resource_id:
            return _error(f'Thread "{thread_id}" was not found. Use mode "threads" to list the threads.')
        return thread

    async def _cursor(self, cursor: str, caller: Caller) -> Message | dict[str, Any]:
        message = await self.store.get_message(cursor)
        owner = await self.store.get_thread(message.thread_id) if message is not None else None
        if message is None or owner is None or owner.resource_id != caller.resource_id:
            if ":" in cursor.strip(":") or "," in cursor:
                start = cursor.split(",")[0].split(":")[0].strip()
                end = cursor.split(",")[-1].split(":")[-1].strip()
                return {"hint": f'The cursor "{cursor}" looks like a range. Pass one message id as the cursor '
                                f'instead: start="{start}" or end="{end}".'}
            return _error(f'Could not find message "{cursor}".')
        if self.config.scope == "thread" and message.thread_id != caller.thread.id:
            return _error(f'Message "{cursor}" is not in the current thread, and recall is limited to the current '
                          'thread (retrieval scope "thread").')
        return message

    # -- messages ------------------------------------------------------------------------

    @staticmethod
    def _keep(args: RecallInput, caller: Caller) -> Callable[[Message], bool]:
        """Which messages a page lists. Never the turn's own input: the actor has it, and
        Mastra's pages at a turn's first step do not list it either (it stores the input only
        after that step; we store it when the turn starts, D50)."""
        if args.partType is None and args.toolName is None:
            return lambda m: m.id not in caller.turn_input and is_visible(m)
        return lambda m: m.id not in caller.turn_input and any(
            matches(p, args.partType, args.toolName) for p in message_parts(m))

    async def _walk(self, thread_id: str, anchor: str | None, forward: bool, needed: int,
                    keep: Callable[[Message], bool]) -> list[Message]:
        """Up to ``needed`` messages that ``keep`` accepts, nearest to ``anchor`` first (from
        the thread's start or end without one); ``data-*``-only messages take no room."""
        found: list[Message] = []
        batch = min(max(needed + 10, 50), 500)
        while len(found) < needed:
            if anchor is None:
                rows, _ = await self.store.page_messages(thread_id, per_page=batch,
                                                                direction="ASC" if forward else "DESC")
            else:
                rows = await self.store.messages_around(thread_id, anchor, after=forward, limit=batch) or []
            nearest_first = rows if forward else list(reversed(rows))
            found += [m for m in nearest_first if keep(m)]
            if len(rows) < batch:
                break
            anchor = nearest_first[-1].id
        return found[:needed]

    def _page_result(self, messages: list[Message], args: RecallInput, *, cursor: str, page: int,
                     has_next: bool, has_prev: bool, **extra: Any) -> dict[str, Any]:
        limit = args.limit or MAX_LIMIT
        high = args.detail == "high"
        parts = [p for m in messages for p in message_parts(m, high=high) if matches(p, args.partType, args.toolName)]
        result = {"messages": "", "count": len(messages), "cursor": cursor, "page": page, "limit": limit,
                  "detail": args.detail, "hasNextPage": has_next, "hasPrevPage": has_prev, "truncated": False,
                  "tokenOffset": 0, **extra}
        if not parts:
            result["messages"] = "No messages here." if page in (1, -1) else "No more messages in this direction."
            return result
        if not high:
            text, truncated, offset = render_page(low_detail(parts))
            return {**result, "messages": text, "truncated": truncated, "tokenOffset": offset}
        first = parts[0]
        first.text = first.full
        text, truncated, offset = render_page([first])
        hints = self._high_hints(first, parts, truncated, has_next, page)
        if hints:
            text += "\n\nHigh detail returns one part at a time. To continue: " + ", or ".join(hints) + "."
        return {**result, "messages": text, "count": 1, "truncated": truncated, "tokenOffset": offset,
                "hasNextPage": has_next or any(p.message.id != first.message.id for p in parts)}

    @staticmethod
    def _high_hints(first: ShownPart, parts: list[ShownPart], truncated: bool, has_next: bool, page: int) -> list[str]:
        hints = []
        if truncated:
            hints.append(f"the rest of this part: {read_hint(first.message.id, first.index)} charOffset=0 "
                         "(then follow nextCharOffset)")
        same = [p for p in parts if p.message.id == first.message.id and p is not first]
        if same:
            hints.append(f'next part: partIndex={same[0].index} on cursor="{first.message.id}"')
        following = next((p for p in parts if p.message.id != first.message.id), None)
        if following is not None:
            hints.append(f'next message: cursor="{following.message.id}" partIndex={following.index}')
        elif has_next:
            hints.append(f"more messages on page {page + 1 if page > 0 else page - 1}")
        return hints

    async def _from_cursor(self, args: RecallInput, caller: Caller, thread: Thread | None) -> dict[str, Any]:
        assert args.cursor is not None
        limit = args.limit or MAX_LIMIT
        page = args.page or 1
        anchor = await self._cursor(args.cursor.strip(), caller)
        if isinstance(anchor, dict):
            if "hint" not in anchor:
                return anchor
            return {"messages": anchor["hint"], "count": 0, "cursor": args.cursor, "page": page, "limit": limit,
                    "detail": args.detail, "hasNextPage": False, "hasPrevPage": False, "truncated": False,
                    "tokenOffset": 0}
        if thread is not None and anchor.thread_id != thread.id:
            return _error(f'Message "{args.cursor}" is not in thread "{thread.id}". Leave threadId out to page '
                          "from this cursor in its own thread.")
        if args.partIndex is not None:
            return self._part(anchor, args.partIndex, args.charOffset or 0)
        if args.charOffset is not None:
            return _error("charOffset needs partIndex: it continues one part of the cursor's message")
        forward = page > 0
        skip = (abs(page) - 1) * limit
        found = await self._walk(anchor.thread_id, anchor.id, forward, skip + limit + 1, self._keep(args, caller))
        window = found[skip:skip + limit]
        more = len(found) > skip + limit
        messages = window if forward else list(reversed(window))
        return self._page_result(messages, args, cursor=args.cursor, page=page,
                                 has_next=more if forward else skip > 0, has_prev=skip > 0 if forward else more,
                                 **_other_thread(anchor.thread_id, caller))

    async def _from_anchor(self, args: RecallInput, caller: Caller, thread: Thread) -> dict[str, Any]:
        limit = args.limit or MAX_LIMIT
        page = abs(args.page or 1) or 1
        from_end = args.anchor == "end"
        skip = (page - 1) * limit
        found = await self._walk(thread.id, None, not from_end, skip + limit + 1, self._keep(args, caller))
        window = found[skip:skip + limit]
        more = len(found) > skip + limit
        messages = list(reversed(window)) if from_end else window
        return self._page_result(messages, args, cursor=messages[0].id if messages else "", page=page,
                                 has_next=skip > 0 if from_end else more, has_prev=more if from_end else skip > 0,
                                 **_other_thread(thread.id, caller))

    def _part(self, message: Message, index: int, char_offset: int) -> dict[str, Any]:
        parts = message_parts(message, high=True, whole=True)
        if not parts:
            return _error(f'Message "{message.id}" has nothing to show (only internal parts); try a neighbouring '
                          "message.")
        part = next((p for p in parts if p.index == index), None)
        if part is None:
            return _error(f'Message "{message.id}" has no part {index}. Its parts: '
                          + ", ".join(f"p{p.index} ({p.type})" for p in parts) + ".")
        if char_offset > len(part.full):
            return _error(f"charOffset {char_offset} is past the end of this part ({len(part.full)} characters)")
        text, next_offset = read_chunk(part.full, char_offset)
        result: dict[str, Any] = {"text": text, "messageId": message.id, "partIndex": index, "role": message.role,
                                  "type": part.type, "truncated": next_offset is not None, "charOffset": char_offset}
        if next_offset is not None:
            result["nextCharOffset"] = next_offset
            result["note"] = (f"To continue this part, call recall cursor=\"{message.id}\" partIndex={index} "
                              f'detail="high" charOffset={next_offset}.')
        return result

    # -- threads -------------------------------------------------------------------------

    async def _threads(self, args: RecallInput, caller: Caller) -> dict[str, Any]:
        if self.config.scope == "thread":
            current = await self.store.get_thread(caller.thread.id) or caller.thread
            return {"threads": _thread_lines(current, caller.thread.id), "count": 1, "page": 0, "hasMore": False,
                    "note": 'Recall is limited to the current thread (retrieval scope "thread"): no other thread '
                            "is listed or readable."}
        page, limit = max(args.page or 0, 0), args.limit or MAX_LIMIT
        try:
            before, after = _date(args.before), _date(args.after)
        except ValueError as exc:
            return _error(str(exc))
        store = self.store
        if before is None and after is None:
            threads, total = await store.list_threads(resource_id=caller.resource_id, order_by="updatedAt",
                                                      page=page, per_page=limit)
        else:
            every, _ = await store.list_threads(resource_id=caller.resource_id, order_by="updatedAt", per_page=None)
            kept = [t for t in every
                    if (before is None or _created(t) < before) and (after is None or _created(t) > after)]
            threads, total = kept[page * limit:(page + 1) * limit], len(kept)
        if not threads:
            return {"threads": "No threads found.", "count": 0, "page": page, "hasMore": False}
        return {"threads": "\n".join(_thread_lines(t, caller.thread.id) for t in threads), "count": len(threads),
                "page": page, "hasMore": (page + 1) * limit < total}


def _thread_lines(thread: Thread, current_id: str) -> str:
    marker = " ← current" if thread.id == current_id else ""
    return (f"- **{thread.title or '(untitled)'}**{marker}\n  id: {thread.id}\n"
            f"  updated: {timestamp(thread.updated_at)} | created: {timestamp(thread.created_at)}")


def _date(value: str | None) -> datetime | None:
    if value is None or not value.strip():
        return None
    try:
        return parse_iso(value.strip())
    except ValueError:
        raise ValueError(f'"{value}" is not a date: use ISO 8601, e.g. "2026-03-15" or "2026-03-15T10:00:00Z"') \
            from None


def _created(thread: Thread) -> datetime:
    try:
        return parse_iso(thread.created_at)
    except (TypeError, ValueError):
        return datetime.min.replace(tzinfo=UTC)


__all__ = ["Caller", "Recall", "RecallInput", "TOOL_NAME"]
