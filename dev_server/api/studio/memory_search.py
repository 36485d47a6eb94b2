"""``GET /memory/search`` by meaning: the vector index, when the agent has semantic recall.

The Studio's search box. The query is embedded with the index's model and the nearest
messages of the named resource (and, when the Studio names the agent as the resource, of
that agent's own threads in its resource, as every Studio list does) are returned in
Mastra's shape, newest first, each with its ``messageRange`` neighbours as
``context.before`` / ``context.after``. A thread id narrows the search to that thread.
"""

from __future__ import annotations

from typing import Any

from dev_server.api.studio.access import Scope
from dev_server.kernel.messages import Message
from dev_server.kernel.ports import SemanticHit
from dev_server.memory.memory import Memory


def _brief(message: Message) -> dict[str, Any]:
    return {"id": message.id, "role": message.role, "content": message.content.get("content", ""),
            "createdAt": message.created_at}


async def semantic_results(memory: Memory, text: str, scope: Scope, thread_id: str | None,
                           limit: int) -> list[dict[str, Any]]:
    assert scope.resource is not None
    hits: list[SemanticHit] = await memory.semantic_search(text, resource_id=scope.resource, thread_id=thread_id,
                                                           top_k=limit)
    if scope.alias is not None:
        agent_id, agent_resource = scope.alias
        theirs = await memory.semantic_search(text, resource_id=agent_resource, thread_id=thread_id, top_k=limit)
        owners = {}
        for hit in theirs:
            if hit.message.thread_id not in owners:
                thread = await memory.store.get_thread(hit.message.thread_id)
                owners[hit.message.thread_id] = thread is not None and thread.agent_id == agent_id
        hits = sorted([*hits, *(h for h in theirs if owners[h.message.thread_id])], key=lambda h: -h.score)[:limit]
    options = memory.options.recall
    before, after = (options.before, options.after) if options else (1, 1)
    results = []
    for hit in hits:
        message = hit.message
        result: dict[str, Any] = {**_brief(message), "threadId": message.thread_id, "threadTitle": hit.thread_title,
                                  "score": round(hit.score, 4)}
        earlier = await memory.store.messages_around(message.thread_id, message.id, after=False, limit=before) \
            if before else []
        later = await memory.store.messages_around(message.thread_id, message.id, after=True, limit=after) \
            if after else []
        if earlier or later:
            result["context"] = {"before": [_brief(m) for m in earlier or []],
                                 "after": [_brief(m) for m in later or []]}
        results.append(result)
    results.sort(key=lambda r: r["createdAt"], reverse=True)
    return results
