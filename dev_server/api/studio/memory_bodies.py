"""Request bodies of the memory routes (Mastra's Studio REST API: memory), as pydantic models.

A body that does not fit is a 400 ``{"error": "Invalid request body", "issues": [...]}``
from the app's one validation handler, before a handler runs and before anything is written.
Unknown keys are ignored (the Studio and ``@mastra/client-js`` send a few we do not use).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, field_validator, with_config
from typing_extensions import TypedDict

ThreadId = Field(default=None, min_length=1, max_length=256)


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class CreateThreadBody(_Body):
    resourceId: str | None = Field(default=None, min_length=1)
    threadId: str | None = ThreadId
    title: str | None = None
    metadata: dict[str, Any] | None = None


class PatchThreadBody(_Body):
    title: str | None = None
    metadata: dict[str, Any] | None = None
    resourceId: str | None = Field(default=None, min_length=1)


class TransferBody(_Body):
    resourceId: str = Field(min_length=1)


class CloneOptions(_Body):
    messageLimit: int | None = Field(default=None, ge=1, le=1_000_000)


class CloneBody(_Body):
    newThreadId: str | None = ThreadId
    resourceId: str | None = Field(default=None, min_length=1)
    title: str | None = None
    metadata: dict[str, Any] | None = None
    options: CloneOptions | None = None


@with_config(ConfigDict(extra="allow"))
class Part(TypedDict):
    """A message part: a ``type`` and, for text, a string ``text``; other keys kept as sent.
    A TypedDict, so a validated part is already the plain dict that is stored."""

    type: str
    text: NotRequired[str | None]


class StoredContent(BaseModel):
    """Content format 2 (a stored message)."""

    model_config = ConfigDict(extra="allow")
    format: Literal[2]
    parts: list[Part] = []
    content: str | None = None
    metadata: dict[str, Any] | None = None


class SavedMessage(BaseModel):
    """A StoredMessage or a V1 message (content a string or parts)."""

    model_config = ConfigDict(extra="ignore")
    threadId: str = Field(min_length=1, max_length=256)
    id: str | None = Field(default=None, min_length=1, max_length=256)
    role: Literal["user", "assistant", "system"]
    type: str | None = None
    content: StoredContent | str | list[Part | str] | None = None
    parts: list[Part] | None = None
    resourceId: str | None = None
    createdAt: str | None = None


class SaveMessagesBody(_Body):
    messages: list[SavedMessage] = Field(min_length=1, max_length=10_000)


class DeleteMessagesBody(_Body):
    messageIds: Any  # str | {id} | [str | {id}], checked below so the issue names "messageIds"

    @field_validator("messageIds")
    @classmethod
    def ids_are_strings(cls, value: Any) -> Any:
        items = value if isinstance(value, list) else [value]
        ids = [i if isinstance(i, str) else i.get("id") if isinstance(i, dict) else None for i in items]
        if not ids or not all(isinstance(i, str) and i for i in ids):
            raise ValueError("must be an id, {id}, or an array of them")
        return value

    def ids(self) -> list[str]:
        items = self.messageIds if isinstance(self.messageIds, list) else [self.messageIds]
        return list(dict.fromkeys(i if isinstance(i, str) else i["id"] for i in items))


class WorkingMemoryBody(_Body):
    workingMemory: str
    resourceId: str | None = None


class BufferStatusBody(_Body):
    """``POST /memory/observational-memory/buffer-status`` (client-js ``awaitBufferStatus``)."""

    agentId: str = Field(min_length=1)
    resourceId: str | None = Field(default=None, min_length=1)
    threadId: str | None = ThreadId


class ManualCycleBody(_Body):
    """``POST /memory/observational-memory/observe`` and ``.../reflect`` (ours, ``dev_server.om.manual``)."""

    agentId: str = Field(min_length=1)
    threadId: str = Field(min_length=1)
    resourceId: str | None = Field(default=None, min_length=1)
