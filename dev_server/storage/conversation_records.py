"""The rows of the conversation store as values: threads and messages (Mastra's content
format 2, kept whole as JSON), how a row decodes, and the store's refusals. Plain data: the
SQL that reads and writes them is ``dev_server.storage.conversations``'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import orjson

from dev_server.storage.errors import StorageError
from dev_server.streaming.sse import repair_value


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


def thread_from_row(row: Any) -> Thread:
    return Thread(row["id"], row["resource_id"], row["title"],
                  json.loads(row["metadata"]) if row["metadata"] else None,
                  row["created_at"], row["updated_at"], row["agent_id"])


def message_from_row(row: Any) -> Message:
    raw = row["content"]
    return Message(row["id"], row["thread_id"], row["resource_id"], row["role"], decode_content(raw), row["created_at"],
                   row["type"], row["seq"], hash(raw))




def decode_content(raw: str) -> Any:
    """orjson (three times json's speed: a turn decodes its whole unobserved window), or
    json for what orjson refuses (lone surrogates, repaired here). Either way what is read
    holds no lone surrogate, so a history built from it needs no repair before it goes to a
    model or a stream."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return repair_value(json.loads(raw))


class ThreadExists(StorageError):
    """A thread with the requested new id already exists."""


class MessageNotVisible(StorageError):
    """A message id that belongs to another resource; callers answer 404 and write nothing."""


class ThreadNotVisible(StorageError):
    """A thread of another resource; callers answer 404 and write nothing."""
