"""The body of ``POST /api/chat``, as ``DefaultChatTransport`` sends it, validated up front.

Everything is checked before a stream starts, so a bad request gets a 4xx JSON error and
nothing is written. Unknown top-level keys are ignored, as the SDK's own servers do.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from app.errors import BadRequest, invalid

MAX_CONVERSATION_ID = 256


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1, max_length=MAX_CONVERSATION_ID)
    role: Literal["system", "user", "assistant"]
    parts: list[dict[str, Any]]
    metadata: Any = None

    @field_validator("parts")
    @classmethod
    def parts_have_types(cls, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for part in parts:
            if not isinstance(part.get("type"), str):
                raise ValueError("every part needs a string 'type'")
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                raise ValueError("a text part needs a string 'text'")
        return parts


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    messages: list[UIMessage] = Field(min_length=1)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    messageId: str | None = None
    conversationId: str | None = None
    agentId: str | None = None

    @field_validator("conversationId")
    @classmethod
    def conversation_id_is_a_safe_key(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value or len(value) > MAX_CONVERSATION_ID:
            raise ValueError(f"must be 1 to {MAX_CONVERSATION_ID} characters")
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
            raise ValueError("must not contain control characters")
        return value

    @field_validator("messages")
    @classmethod
    def last_message_is_from_the_user(cls, messages: list[UIMessage]) -> list[UIMessage]:
        if messages and messages[-1].role != "user":
            raise ValueError("the last message must have role 'user'")
        if not any(p.get("type") in ("text", "file") for p in messages[-1].parts):
            raise ValueError("the last message needs a text or file part")
        return messages


def parse_chat_request(raw: bytes) -> ChatRequest:
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise invalid("body", "body", f"Malformed JSON: {exc}") from None
    if not isinstance(body, dict):
        raise invalid("body", "body", "The body must be a JSON object")
    try:
        return ChatRequest.model_validate(body, strict=False)
    except ValidationError as exc:
        raise BadRequest("Invalid request body", [
            {"field": ".".join(str(p) for p in e["loc"]) or "body", "message": e["msg"]} for e in exc.errors()
        ]) from None
