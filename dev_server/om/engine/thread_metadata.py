"""What each cycle writes into a thread's OM metadata (``metadata.mastra.om``), key for key
as Mastra writes it (docs/observational-memory.md#record).

A patch is merged shallowly (``OMRecordStore.patch_thread_om``); a None value removes its
key, as Mastra's ``undefined`` does once the metadata is stored as JSON:

* a synchronous observation: ``currentTask``, ``suggestedResponse`` and ``threadTitle`` of
  this cycle (absent ones removed), ``extracted`` (the earlier values and this cycle's, ``{}``
  at least), ``lastObservedMessageCursor``; in resource scope also ``lastObservedAt`` (each
  thread's own cursor);
* an activation: ``currentTask``, ``suggestedResponse`` and ``threadTitle`` of the newest
  activated chunk (a background observer writes no hints, so this clears stale ones);
* a background observation or a reflection with extracted values: ``extracted`` and the
  values it produced (a reflection keeps the hints it did not replace).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dev_server.kernel.messages import Message


def observation_patch(hints: Mapping[str, Any] | None, current_task: str | None, suggested_response: str | None,
                      extracted: Mapping[str, Any], messages: Sequence[Message], *,
                      resource_scope: bool) -> dict[str, Any]:
    """After a synchronous observation of ``messages``; ``extracted`` is the cycle's
    extraction patch (built-ins under their keys, user values under their paths)."""
    newest = max(messages, key=lambda m: (m.created_at, m.seq or 0))
    patch: dict[str, Any] = {"currentTask": current_task, "suggestedResponse": suggested_response,
                             "threadTitle": None, **with_extracted(hints, extracted),
                             "lastObservedMessageCursor": {"createdAt": newest.created_at, "id": newest.id}}
    if resource_scope:
        patch["lastObservedAt"] = newest.created_at
    return patch


def activation_patch(chunks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """After activating ``chunks`` (oldest first): the newest one's hints and title."""
    newest = chunks[-1] if chunks else {}
    return {"suggestedResponse": newest.get("suggestedContinuation"), "currentTask": newest.get("currentTask"),
            "threadTitle": newest.get("threadTitle")}


def with_extracted(hints: Mapping[str, Any] | None, patch: Mapping[str, Any]) -> dict[str, Any]:
    """``patch`` with ``extracted`` always present: the earlier values when it sets none."""
    previous = (hints or {}).get("extracted")
    return {"extracted": dict(previous) if isinstance(previous, Mapping) else {}, **patch}
