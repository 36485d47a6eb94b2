"""Threads and messages as plain values: what every layer speaks about a conversation.

A message keeps Mastra's content format 2 whole (``content`` is the JSON object stored);
``to_api`` is the shape the Studio REST contract lists. Decoding a stored row is the
conversation store's job (``dev_server.storage.conversation_records``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Thread:
    id: str
    resource_id: str
    title: str = ""
    metadata: dict[str, Any] | None = None
    created_at: str = ""
    updated_at: str = ""
    agent_id: str | None = None  # the agent the thread was created for (not part of Mastra's shape)

    def to_api(self) -> dict[str, Any]:
        body: dict[str, Any] = {"id": self.id, "title": self.title, "resourceId": self.resource_id,
                                "createdAt": self.created_at, "updatedAt": self.updated_at}
        if self.metadata is not None:
            body["metadata"] = self.metadata
        return body


@dataclass
class Message:
    id: str
    thread_id: str
    resource_id: str
    role: str
    content: dict[str, Any]
    created_at: str
    type: str = "text"
    seq: int | None = field(default=None, compare=False)
    # hash of the stored JSON, set when read from the database: equal digests, equal content
    # (an in-process memo key; ``dataclasses.replace`` with new content must reset it)
    stored_digest: int | None = field(default=None, compare=False, repr=False)

    def to_api(self) -> dict[str, Any]:
        return {"id": self.id, "role": self.role, "type": self.type, "createdAt": self.created_at,
                "threadId": self.thread_id, "resourceId": self.resource_id, "content": self.content}
