"""Memory routes of the Mastra API (STUDIO-REST.md section 5): threads, messages, working
memory, search. Every thread route checks the thread against the resource in force
(``access``); messages written by the gateway are visible here at once (same database).
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request

from app.api.bodies import json_object
from app.api.studio.access import agent_or_404, effective_resource, forced_resource, optional_agent, visible
from app.api.studio.agent_input import input_messages
from app.api.studio.query import Query, order_by
from app.clock import parse_iso, to_iso
from app.errors import BadRequest, invalid
from app.storage.conversations import ConversationStore, Message, Thread

router = APIRouter(prefix="/api/memory")

MAX_THREADS_PAGE = 1000
MAX_MESSAGES_PAGE = 1000


def _store(request: Request) -> ConversationStore:
    return request.app.state.conversations


async def _scope(request: Request, query: Query) -> tuple[Any, str | None]:
    """(agent or None, resource in force or None) for a memory request."""
    forced = await forced_resource(request)
    agent = optional_agent(request, query.str("agentId"))
    return agent, effective_resource(forced, agent, query.str("resourceId", aliases=("resourceid",)))


def _optional_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise invalid("body", key, "must be a string")
    return value


def _optional_object(data: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = data.get(key)
    if value is not None and not isinstance(value, dict):
        raise invalid("body", key, "must be an object")
    return value


# -- status and config --------------------------------------------------------------------


@router.get("/status")
async def status(request: Request) -> dict[str, Any]:
    query = Query(request)
    agent_id = query.str("agentId")
    if not agent_id:
        raise invalid("query", "agentId", "agentId is required")
    agent = optional_agent(request, agent_id)
    if agent is None:
        return {"result": True}
    if agent.memory is None:
        return {"result": False}
    return {"result": True, "memoryType": "local", "observationalMemory": {"enabled": False}}


@router.get("/config")
async def config(request: Request) -> dict[str, Any]:
    agent = optional_agent(request, Query(request).str("agentId"))
    if agent is None or agent.memory is None:
        return {"config": None}
    return {"config": agent.memory.options.describe(), "memoryType": "local"}


# -- threads ------------------------------------------------------------------------------


@router.get("/threads")
async def list_threads(request: Request) -> dict[str, Any]:
    query = Query(request)
    _, resource = await _scope(request, query)
    page = query.int("page", 0)
    per_page = query.per_page(100, MAX_THREADS_PAGE)
    field, direction = order_by(query, ("createdAt", "updatedAt"), ("createdAt", "DESC"))
    metadata = query.json("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise invalid("query", "metadata", "must be a JSON object")
    threads, total = await _store(request).list_threads(resource_id=resource, metadata=metadata, order_by=field,
                                                        direction=direction, page=page, per_page=per_page)
    return {"threads": [t.to_api() for t in threads], "total": total, "page": page,
            "perPage": per_page if per_page is not None else False,
            "hasMore": per_page is not None and (page + 1) * per_page < total}


@router.post("/threads")
async def create_thread(request: Request) -> dict[str, Any]:
    query = Query(request)
    agent = agent_or_404(request, query.str("agentId") or "")
    data = await json_object(request)
    forced = await forced_resource(request)
    requested = _optional_str(data, "resourceId")
    if not requested and forced is None:
        raise invalid("body", "resourceId", "resourceId is required")
    resource = effective_resource(forced, agent, requested)
    thread_id = _optional_str(data, "threadId") or str(uuid.uuid4())
    existing = await _store(request).get_thread(thread_id)
    if existing is not None and forced is not None and existing.resource_id != forced:
        raise invalid("body", "threadId", "a thread with this id already exists")
    thread = Thread(thread_id, resource, _optional_str(data, "title") or "", _optional_object(data, "metadata"),
                    created_at=existing.created_at if existing else "")
    return (await _store(request).save_thread(thread)).to_api()


async def _thread(request: Request, thread_id: str) -> tuple[Thread, Query]:
    query = Query(request)
    _, resource = await _scope(request, query)
    return visible(await _store(request).get_thread(thread_id), resource), query


@router.get("/threads/{thread_id}")
async def get_thread(thread_id: str, request: Request) -> dict[str, Any]:
    thread, _ = await _thread(request, thread_id)
    return thread.to_api()


@router.patch("/threads/{thread_id}")
async def update_thread(thread_id: str, request: Request) -> dict[str, Any]:
    thread, _ = await _thread(request, thread_id)
    data = await json_object(request)
    forced = await forced_resource(request)
    new_resource = None if forced is not None else _optional_str(data, "resourceId")
    updated = await _store(request).update_thread(thread.id, title=_optional_str(data, "title"),
                                                  metadata=_optional_object(data, "metadata"),
                                                  resource_id=new_resource)
    return updated.to_api()


@router.delete("/threads/{thread_id}")
async def delete_thread(thread_id: str, request: Request) -> dict[str, Any]:
    thread, _ = await _thread(request, thread_id)
    await _store(request).delete_thread(thread.id)
    return {"result": "Thread deleted"}


@router.post("/threads/{thread_id}/clone")
async def clone_thread(thread_id: str, request: Request) -> dict[str, Any]:
    source, query = await _thread(request, thread_id)
    data = await json_object(request)
    options = _optional_object(data, "options") or {}
    limit = options.get("messageLimit")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise invalid("body", "options.messageLimit", "must be a positive integer")
    forced = await forced_resource(request)
    agent = optional_agent(request, query.str("agentId"))
    resource = effective_resource(forced, agent, _optional_str(data, "resourceId")) or source.resource_id
    new_thread = Thread(_optional_str(data, "newThreadId") or str(uuid.uuid4()), resource,
                        _optional_str(data, "title") or (f"Clone of {source.title}" if source.title else ""),
                        {**(source.metadata or {}), **(_optional_object(data, "metadata") or {}),
                         "clonedFrom": source.id})
    if await _store(request).get_thread(new_thread.id) is not None:
        raise invalid("body", "newThreadId", "a thread with this id already exists")
    copies = await _store(request).clone_thread(source, new_thread, limit)
    return {"thread": new_thread.to_api(), "clonedMessages": [m.to_api() for m in copies]}


# -- messages -----------------------------------------------------------------------------


@router.get("/threads/{thread_id}/messages")
async def list_messages(thread_id: str, request: Request) -> dict[str, Any]:
    thread, query = await _thread(request, thread_id)
    store = _store(request)
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
    page = query.int("page", 0)
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
    bounds = []
    for key in ("start", "end"):
        raw = date_range.get(key)
        try:
            bounds.append(to_iso(parse_iso(raw)) if raw else None)
        except (TypeError, ValueError):
            raise invalid("query", f"filter.dateRange.{key}", "must be an ISO-8601 date") from None
    return (roles or None, bounds[0], bounds[1], not date_range.get("startExclusive"),
            not date_range.get("endExclusive"))


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
                for neighbour in await store.messages_around(thread.id, message.id, after=after, limit=count) or []:
                    extra[neighbour.id] = neighbour
    return sorted(extra.values(), key=lambda m: (m.created_at, m.seq or 0))


@router.post("/save-messages")
async def save_messages(request: Request) -> dict[str, Any]:
    query = Query(request)
    agent = agent_or_404(request, query.str("agentId") or "")
    data = await json_object(request)
    items = data.get("messages")
    if not isinstance(items, list) or not items:
        raise invalid("body", "messages", "must be a non-empty array")
    forced = await forced_resource(request)
    store = _store(request)
    saved: list[Message] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("threadId"), str) or not item["threadId"]:
            raise invalid("body", f"messages.{index}.threadId", "every message needs a threadId")
        resource = effective_resource(forced, agent, item.get("resourceId") if isinstance(item.get("resourceId"), str)
                                      else None) or agent.definition.resource
        thread = await store.ensure_thread(item["threadId"], resource)
        visible(thread, resource)
        message = input_messages([item], thread.id, resource)[0]
        if isinstance(item.get("createdAt"), str):
            try:
                message.created_at = to_iso(parse_iso(item["createdAt"]))
            except ValueError:
                raise invalid("body", f"messages.{index}.createdAt", "must be an ISO-8601 date") from None
        if isinstance(item.get("type"), str):
            message.type = item["type"]
        if isinstance(item.get("content"), dict) and isinstance(item["content"].get("metadata"), dict):
            message.content["metadata"] = item["content"]["metadata"]
        saved.append(message)
    for message in saved:
        if await store.get_message(message.id) is not None:
            await store.replace_message(message)
        else:
            await store.append_messages(message.thread_id, [message])
    return {"messages": [m.to_api() for m in saved]}


@router.post("/messages/delete")
async def delete_messages(request: Request) -> dict[str, Any]:
    query = Query(request)
    _, resource = await _scope(request, query)
    data = await json_object(request)
    raw = data.get("messageIds")
    items = raw if isinstance(raw, list) else [raw]
    ids = [i if isinstance(i, str) else i.get("id") if isinstance(i, dict) else None for i in items]
    if not ids or not all(isinstance(i, str) and i for i in ids):
        raise invalid("body", "messageIds", "must be an id, {id}, or an array of them")
    store = _store(request)
    if resource is not None:  # only messages of threads the caller may see
        owners = await store.locate(ids)
        for thread_id in set(owners.values()):
            visible(await store.get_thread(thread_id), resource)
    count = await store.delete_messages(ids)
    noun = "message" if count == 1 else "messages"
    return {"success": True, "message": f"{count} {noun} deleted successfully"}


# -- working memory and search ------------------------------------------------------------


@router.get("/threads/{thread_id}/working-memory")
async def get_working_memory(thread_id: str, request: Request) -> dict[str, Any]:
    _, resource = await _scope(request, Query(request))
    store = _store(request)
    thread = await store.get_thread(thread_id)
    if thread is None or (resource is not None and thread.resource_id != resource):
        return {"workingMemory": None, "source": "thread", "workingMemoryTemplate": None, "threadExists": False}
    return {"workingMemory": await store.working_memory(thread_id=thread.id), "source": "thread",
            "workingMemoryTemplate": None, "threadExists": True}


@router.post("/threads/{thread_id}/working-memory")
async def update_working_memory(thread_id: str, request: Request) -> dict[str, Any]:
    query = Query(request)
    agent = agent_or_404(request, query.str("agentId") or "")
    if agent.memory is None or not agent.memory.options.working_memory:
        raise BadRequest("Working memory is not enabled for this agent")
    thread, _ = await _thread(request, thread_id)
    data = await json_object(request)
    text = data.get("workingMemory")
    if not isinstance(text, str):
        raise invalid("body", "workingMemory", "must be a string")
    await _store(request).set_working_memory(text, thread_id=thread.id)
    return {"success": True}


@router.get("/search")
async def search(request: Request) -> dict[str, Any]:
    query = Query(request)
    agent_id, text = query.str("agentId"), query.str("searchQuery")
    if not agent_id:
        raise invalid("query", "agentId", "agentId is required")
    if not text:
        raise invalid("query", "searchQuery", "searchQuery is required")
    _, resource = await _scope(request, query)
    if resource is None:
        raise invalid("query", "resourceId", "resourceId is required")
    thread_id = query.str("threadId")
    limit = query.int("limit", 20, minimum=1, maximum=100)
    hits = await _store(request).search_messages(text, resource_id=resource, thread_id=thread_id, limit=limit)
    results = [{"id": m.id, "role": m.role, "content": m.content.get("content", ""), "createdAt": m.created_at,
                "threadId": m.thread_id, "threadTitle": title} for m, title in hits]
    return {"results": results, "count": len(results), "query": text,
            "searchScope": "thread" if thread_id else "resource", "searchType": "text"}


@router.get("/observational-memory")
async def observational_memory(request: Request) -> dict[str, Any]:
    agent_or_404(request, Query(request).str("agentId") or "")
    raise BadRequest("Observational Memory is not enabled for this agent")


@router.post("/observational-memory/buffer-status")
async def buffer_status(request: Request) -> dict[str, Any]:
    raise BadRequest("Observational Memory is not enabled for this agent")
