"""How a row of the conversation store decodes into a thread or a message (the values live
in ``dev_server.kernel.messages``), and the store's refusals. The SQL that reads and writes
them is ``dev_server.storage.conversations``'s.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from dev_server.kernel.messages import Message, Thread
from dev_server.kernel.text import repair_value
from dev_server.storage.errors import StorageError


def thread_from_row(row: Any) -> Thread:
    return Thread(row["id"], row["resource_id"], row["title"],
                  json.loads(row["metadata"]) if row["metadata"] else None,
                  row["created_at"], row["updated_at"], row["agent_id"])


MESSAGE_COLUMNS = "seq, id, thread_id, resource_id, role, type, content, created_at"  # what message_from_row reads


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
