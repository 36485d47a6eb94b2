"""Memory routes of the Mastra API (Mastra's Studio REST API: memory): threads, messages, working
memory, search. Every thread route checks the thread against the request's ``Scope``
(``access``): the forced resource with auth on, else the resource the client names (an
agent's id also reaching that agent's own threads). A thread, message or working memory of
another resource behaves as if it did not exist: 404, nothing written. Messages written by
the gateway are visible here at once (same database). Bodies are typed (``memory_bodies``);
multi-row writes are one transaction each (``ConversationStore``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from dev_server.api.deps import ConversationsDep, ForcedResource, MastraQuery
from dev_server.api.query import ISO_TIME, Query, iso_time, order_by
from dev_server.api.studio.access import OptionalAgent, QueryAgent, Scope, ScopeDep, effective_resource, scope_for
from dev_server.api.studio.agent_input import fold_tool_results, message_parts
from dev_server.api.studio.memory_bodies import (
    CloneBody,
    CreateThreadBody,
    DeleteMessagesBody,
    PatchThreadBody,
    SavedMessage,
    SaveMessagesBody,
    StoredContent,
    TransferBody,
    WorkingMemoryBody,
)
from dev_server.api.studio.memory_search import semantic_results
from dev_server.kernel import ids
from dev_server.kernel.clock import parse_iso, spaced_iso, to_iso
from dev_server.kernel.convert import flat_text
from dev_server.kernel.errors import BadRequest, NotFound, invalid
from dev_server.kernel.messages import Message, Thread
from dev_server.kernel.ports import SemanticSearchUnavailable
from dev_server.memory.working_document import WorkingMemoryInvalid
from dev_server.storage.conversations import ConversationStore, MessageNotVisible, ThreadExists, ThreadNotVisible

router = APIRouter(prefix="/api/memory")

MAX_THREADS_PAGE = 1000
MAX_MESSAGES_PAGE = 1000


async def _visible_thread(store: ConversationStore, scope: Scope, thread_id: str) -> Thread:
    return scope.visible(await store.get_thread(thread_id))


# -- threads ------------------------------------------------------------------------------


@router.get("/threads")
async def list_threads(query: MastraQuery, scope: ScopeDep, store: ConversationsDep) -> dict[str, Any]:
    per_page = query.per_page(100, MAX_THREADS_PAGE)
    page = query.page(per_page)
    field, direction = order_by(query, ("createdAt", "updatedAt"), ("createdAt", "DESC"))
    metadata = query.json("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise invalid("query", "metadata", "must be a JSON object")
    threads, total = await store.list_threads(resource_id=scope.resource, agent_alias=scope.alias,
                                              metadata=metadata, order_by=field, direction=direction,
                                              page=page, per_page=per_page)
    return {"threads": [t.to_api() for t in threads], "total": total, "page": page,
            "perPage": per_page if per_page is not None else False,
            "hasMore": per_page is not None and (page + 1) * per_page < total}


@router.post("/threads")
async def create_thread(agent: QueryAgent, body: CreateThreadBody, forced: ForcedResource,
                        store: ConversationsDep) -> dict[str, Any]:
    if not body.resourceId and forced is None:
        raise invalid("body", "resourceId", "resourceId is required")
    resource = effective_resource(forced, agent, body.resourceId)
    thread = Thread(body.threadId or str(ids.uuid4()), resource, body.title or "", body.metadata, agent_id=agent.id)
    try:  # with auth on, an id taken in another resource is refused in the same statement
        return (await store.save_thread(thread, unless_owned_by_other_than=forced)).to_api()
    except ThreadExists:
        raise invalid("body", "threadId", "a thread with this id already exists") from None


@router.get("/threads/{thread_id}")
async def get_thread(thread_id: str, scope: ScopeDep, store: ConversationsDep) -> dict[str, Any]:
    return (await _visible_thread(store, scope, thread_id)).to_api()


@router.patch("/threads/{thread_id}")
async def update_thread(thread_id: str, scope: ScopeDep, store: ConversationsDep, forced: ForcedResource,
                        body: Annotated[PatchThreadBody | None, Body()] = None) -> dict[str, Any]:
    thread = await _visible_thread(store, scope, thread_id)
    body = body or PatchThreadBody()
    updated = await store.update_thread(thread.id, title=body.title, metadata=body.metadata,
                                        resource_id=None if forced is not None else body.resourceId)
    return updated.to_api()


@router.post("/threads/{thread_id}/transfer")
async def transfer_thread(thread_id: str, body: TransferBody, scope: ScopeDep, store: ConversationsDep,
                          forced: ForcedResource) -> dict[str, Any]:
    """Move a thread to another resource; with auth on it stays in the caller's."""
    thread = await _visible_thread(store, scope, thread_id)
    return (await store.update_thread(thread.id,
                                      resource_id=effective_resource(forced, None, body.resourceId))).to_api()


@router.delete("/threads/{thread_id}")
async def delete_thread(thread_id: str, scope: ScopeDep, store: ConversationsDep) -> dict[str, Any]:
    thread = await _visible_thread(store, scope, thread_id)
    await store.delete_thread(thread.id)
    return {"result": "Thread deleted"}


@router.post("/threads/{thread_id}/clone")
async def clone_thread(thread_id: str, scope: ScopeDep, store: ConversationsDep, forced: ForcedResource,
                       agent: OptionalAgent, body: Annotated[CloneBody | None, Body()] = None) -> dict[str, Any]:
    source = await _visible_thread(store, scope, thread_id)
    body = body or CloneBody()
    limit = body.options.messageLimit if body.options else None
    resource = effective_resource(forced, agent, body.resourceId) or source.resource_id
    new_thread = Thread(body.newThreadId or str(ids.uuid4()), resource,
                        body.title or (f"Clone of {source.title}" if source.title else ""),
                        {**(source.metadata or {}), **(body.metadata or {}), "clonedFrom": source.id},
                        agent_id=agent.id if agent else source.agent_id)
    try:
        copies = await store.clone_thread(source, new_thread, limit)
    except ThreadExists:
        raise invalid("body", "newThreadId", "a thread with this id already exists") from None
    return {"thread": new_thread.to_api(), "clonedMessages": [m.to_api() for m in copies]}


# -- messages -----------------------------------------------------------------------------


@router.get("/threads/{thread_id}/messages")
async def list_messages(thread_id: str, query: MastraQuery, scope: ScopeDep, store: ConversationsDep) -> dict[str, Any]:
    thread = await _visible_thread(store, scope, thread_id)
    per_page = query.per_page(40, MAX_MESSAGES_PAGE)
    limit = per_page or MAX_MESSAGES_PAGE
    for cursor, after in (("after", True), ("before", False)):
        anchor = query.str(cursor)
        if anchor:
            found = await store.messages_around(thread.id, anchor, after=after, limit=limit)
            if found is None:
                raise invalid("query", cursor, "is not a message of this thread")
            return {"messages": [m.to_api() for m in found], "uiMessages": None, "total": len(found), "page": 0,
                    "perPage": limit, "hasMore": len(found) == limit}
    page = query.page(per_page)
    _, direction = order_by(query, ("createdAt",), ("createdAt", "DESC"))
    roles, after, before, after_inclusive, before_inclusive = _message_filter(query)
    messages, total = await store.page_messages(thread.id, page=page, per_page=per_page, direction=direction,
                                                roles=roles, after=after, before=before,
                                                after_inclusive=after_inclusive, before_inclusive=before_inclusive)
    messages = await _with_included(store, thread, messages, query.json("include"))
    return {"messages": [m.to_api() for m in messages], "uiMessages": None, "total": total, "page": page,
            "perPage": per_page if per_page is not None else False,
            "hasMore": per_page is not None and (page + 1) * per_page < total}


def _message_filter(query: Query) -> tuple[list[str] | None, str | None, str | None, bool, bool]:
    value = query.json("filter") or {}
    if not isinstance(value, dict):
        raise invalid("query", "filter", "must be a JSON object")
    roles = value.get("roles")
    if roles is not None and (not isinstance(roles, list) or not all(isinstance(r, str) for r in roles)):
        raise invalid("query", "filter.roles", "must be a list of strings")
    date_range = value.get("dateRange") or {}
    if not isinstance(date_range, dict):
        raise invalid("query", "filter.dateRange", "must be an object")
    start, end = (iso_time(date_range.get(key), f"filter.dateRange.{key}") for key in ("start", "end"))
    return (roles or None, to_iso(start) if start else None, to_iso(end) if end else None,
            not date_range.get("startExclusive"), not date_range.get("endExclusive"))


async def _with_included(store: ConversationStore, thread: Thread, page: list[Message], include: Any) -> list[Message]:
    """Add ``include`` messages (and their neighbours) to a page, keeping chronological order."""
    if not include:
        return page
    if not isinstance(include, list):
        raise invalid("query", "include", "must be a JSON array")
    extra: dict[str, Message] = {m.id: m for m in page}
    for item in include:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise invalid("query", "include", "items must be objects with an id")
        message = await store.get_message(item["id"])
        if message is None or message.thread_id != thread.id:
            continue
        extra[message.id] = message
        for key, after in (("withPreviousMessages", False), ("withNextMessages", True)):
            count = item.get(key) or 0
            if isinstance(count, int) and count > 0:
                for neighbour in await store.messages_around(thread.id, message.id, after=after,
                                                             limit=min(count, MAX_MESSAGES_PAGE)) or []:
                    extra[neighbour.id] = neighbour
    return sorted(extra.values(), key=lambda m: (m.created_at, m.seq or 0))


@router.post("/save-messages")
async def save_messages(agent: QueryAgent, body: SaveMessagesBody, forced: ForcedResource,
                        store: ConversationsDep) -> dict[str, Any]:
    """Insert or update N messages (creating their threads) in one transaction. A thread or a
    message id of another resource is a 404 and nothing is written."""
    threads: dict[str, Thread] = {}
    stamps = spaced_iso(len(body.messages), store.clock)
    messages = []
    for index, item in enumerate(body.messages):
        thread = threads.get(item.threadId)
        if thread is None:
            resource = effective_resource(forced, agent, item.resourceId) or agent.definition.resource
            thread = threads[item.threadId] = Thread(item.threadId, resource, agent_id=agent.id)
        messages.append(_saved_message(item, index, thread, stamps[index]))
    converted = fold_tool_results(messages)
    try:
        await store.save_messages(list(threads.values()), converted)
    except ThreadNotVisible:
        raise NotFound("Thread not found") from None
    except MessageNotVisible:
        raise NotFound("Message not found") from None
    return {"messages": [m.to_api() for m in converted]}


def _saved_message(item: SavedMessage, index: int, thread: Thread, stamp: str) -> Message:
    """A message of a save-messages body as stored, straight from the validated item (its
    parts are plain dicts already), converted as every input message is (``message_parts``)."""
    key = "parts" if item.parts is not None else "content"
    content = item.content
    try:
        if item.parts is not None:
            parts = message_parts(_sent(item.parts), ui=True)
        elif isinstance(content, StoredContent):
            parts = message_parts({"format": 2, "parts": _sent(content.parts)}, ui=False)
        elif isinstance(content, list):
            parts = message_parts([p if isinstance(p, str) else _sent([p])[0] for p in content], ui=False)
        else:
            parts = message_parts(content or "", ui=False)
    except (ValueError, TypeError, KeyError) as exc:
        raise BadRequest("Invalid request body", [{"field": f"messages.{index}.{key}", "message": str(exc)}]) from None
    stored = {"format": 2, "parts": parts, "content": flat_text(parts)}
    if isinstance(content, StoredContent) and content.metadata is not None:
        stored["metadata"] = content.metadata
    created_at = stamp
    if item.createdAt is not None:
        try:
            created_at = to_iso(parse_iso(item.createdAt))
        except ValueError:
            raise invalid("body", f"messages.{index}.createdAt", ISO_TIME) from None
    return Message(item.id or str(ids.uuid4()), thread.id, thread.resource_id, item.role, stored, created_at,
                   item.type or "text")


def _sent(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parts as sent, less their null keys (a part's null ``text`` counts as absent)."""
    return [{k: v for k, v in part.items() if v is not None} for part in parts]


@router.post("/messages/delete")
async def delete_messages(body: DeleteMessagesBody, scope: ScopeDep, store: ConversationsDep) -> dict[str, Any]:
    try:
        count = await store.delete_messages(body.ids(), resource_id=scope.resource, agent_alias=scope.alias)
    except MessageNotVisible:
        raise NotFound("Message not found") from None
    noun = "message" if count == 1 else "messages"
    return {"success": True, "message": f"{count} {noun} deleted successfully"}


# -- working memory and search ------------------------------------------------------------


def _named_resource(query: Query) -> str | None:
    """``resourceId`` from the query; client-js sends the literal ``undefined`` for none."""
    value = query.str("resourceId", aliases=("resourceid",))
    return value if value and value != "undefined" else None


@router.get("/threads/{thread_id}/working-memory")
async def get_working_memory(thread_id: str, query: MastraQuery, scope: ScopeDep, agent: OptionalAgent,
                             forced: ForcedResource, store: ConversationsDep) -> dict[str, Any]:
    """The document on the agent's configured scope (none when the agent has no working
    memory). A thread of another resource is treated as not existing; on resource scope
    the named resource is still read (the caller's own under auth)."""
    stored = await store.get_thread(thread_id)
    thread = stored if scope.admits(stored) else None
    memory = agent.memory if agent is not None else None
    options = memory.options.working if memory is not None else None
    if options is None:
        return {"workingMemory": None, "source": "thread", "workingMemoryTemplate": None,
                "threadExists": thread is not None}
    resource = effective_resource(forced, agent, _named_resource(query))
    return {"workingMemory": await memory.get_working_memory(thread, resource), "source": options.scope,
            "workingMemoryTemplate": {"format": options.format, "content": options.template_content},
            "threadExists": thread is not None}


@router.post("/threads/{thread_id}/working-memory")
async def update_working_memory(thread_id: str, agent: QueryAgent, body: WorkingMemoryBody, query: MastraQuery,
                                forced: ForcedResource, store: ConversationsDep) -> dict[str, Any]:
    """Write the document on the agent's configured scope, through ``Memory``. The thread
    must be visible to the caller (404 otherwise, nothing written); on resource scope a
    thread not stored yet is allowed and the named resource (forced under auth) is written."""
    requested = body.resourceId or _named_resource(query)
    scope = scope_for(forced, agent, requested)
    stored = await store.get_thread(thread_id)
    if stored is not None:
        scope.visible(stored)  # a foreign thread is a 404 first
    memory = agent.memory
    if memory is None or memory.options.working is None:
        raise BadRequest("Working memory is not enabled for this agent")
    if stored is None and memory.options.working.scope == "thread":
        raise NotFound("Thread not found")
    if stored is None and scope.resource is None:
        raise invalid("body", "resourceId", "resourceId is required for a thread not stored yet")
    try:
        await memory.update_working_memory(body.workingMemory, stored, scope.resource)
    except WorkingMemoryInvalid as exc:
        raise invalid("body", "workingMemory", str(exc)) from None
    return {"success": True}


@router.get("/search")
async def search(query: MastraQuery, scope: ScopeDep, store: ConversationsDep, agent: OptionalAgent) -> dict[str, Any]:
    """Mastra's memory search: by meaning (the vector index) when the agent has semantic
    recall and its embedder answers, else by keyword (the FTS index); ``searchType`` says which."""
    agent_id, text = query.str("agentId"), query.str("searchQuery")
    if not agent_id:
        raise invalid("query", "agentId", "agentId is required")
    if not text:
        raise invalid("query", "searchQuery", "searchQuery is required")
    if scope.resource is None:
        raise invalid("query", "resourceId", "resourceId is required")
    thread_id = query.str("threadId")
    limit = query.int("limit", 20, minimum=1, maximum=100)
    searched = {"query": text, "searchScope": "thread" if thread_id else "resource"}
    memory = agent.memory if agent is not None else None
    if memory is not None and memory.options.recall is not None:
        try:
            results = await semantic_results(memory, text, scope, thread_id, limit)
            return {"results": results, "count": len(results), **searched, "searchType": "semantic"}
        except SemanticSearchUnavailable:
            pass  # the embedder is down or starting: the keyword index answers
    hits = await store.search_messages(text, resource_id=scope.resource, agent_alias=scope.alias,
                                       thread_id=thread_id, limit=limit)
    results = [{"id": m.id, "role": m.role, "content": m.content.get("content", ""), "createdAt": m.created_at,
                "threadId": m.thread_id, "threadTitle": title} for m, title in hits]
    return {"results": results, "count": len(results), **searched, "searchType": "text"}
