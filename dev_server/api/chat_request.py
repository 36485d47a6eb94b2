"""The body of ``POST /api/chat``, as the AI SDK's ``DefaultChatTransport`` sends it.

FastAPI validates it before the handler runs, so a bad request gets the app's one 400
shape (``{"error": "Invalid request body", "issues": [{field, message}]}``) and nothing is
written; the models double as the route's OpenAPI schema. Unknown top-level keys are
ignored, as the SDK's own servers do; a message keeps the fields it was sent with.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_CONVERSATION_ID = 256
TOOL_OUTPUT_STATES = ("output-available", "output-error")


class UIMessage(BaseModel):
    """One AI SDK ``UIMessage``; ``useChat`` sends the whole history each turn."""

    model_config = ConfigDict(extra="allow", json_schema_extra={
        "example": {"id": "msg-1", "role": "user", "parts": [{"type": "text", "text": "Hello"}]}})

    id: str = Field(min_length=1, max_length=MAX_CONVERSATION_ID, description="Client-side message id")
    role: Literal["system", "user", "assistant"]
    parts: list[dict[str, Any]] = Field(description="UI parts: text, file, reasoning, tool-*, data-*, ...")
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
    """``DefaultChatTransport``'s body (``id``, ``messages``, ``trigger``, ``messageId``) plus
    this server's ``conversationId`` and ``agentId``, passed through the transport's ``body``."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"example": {
        "id": "chat-1", "trigger": "submit-message", "conversationId": "my-thread",
        "messages": [{"id": "msg-1", "role": "user", "parts": [{"type": "text", "text": "Hello"}]}]}})

    id: str | None = Field(None, description="The useChat chat id")
    messages: list[UIMessage] = Field(min_length=1, description="The conversation as the client has it; the last "
                                                                "message is the user's new (or edited) one, or the "
                                                                "assistant message with a client tool's output")
    trigger: Literal["submit-message", "regenerate-message"] = Field(
        "submit-message", description="submit-message: a new message, a retry (a stored id with the same "
                                      "content: answered with the stored reply, nothing written) or, with "
                                      "messageId naming it, an edit; regenerate-message: a new reply to the last "
                                      "message (409 when the thread has turns after it that the request does not "
                                      "name)")
    messageId: str | None = Field(None, description="The message being edited, or the reply being regenerated")
    conversationId: str | None = Field(None, description="The thread; without it each turn gets a fresh one")
    agentId: str | None = Field(None, description="The agent (default chat-agent, else the first agent);"
                                " /api/agents/{id}/chat wins")

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
        last = messages[-1] if messages else None
        if last is not None and last.role == "assistant" and carries_tool_output(last):
            return messages  # addToolResult: the assistant message with a client tool's output
        if last is not None and last.role != "user":
            raise ValueError("the last message must have role 'user' (or be the assistant message with a "
                             "client tool's output)")
        if last is not None and not any(p.get("type") in ("text", "file") for p in last.parts):
            raise ValueError("the last message needs a text or file part")
        return messages


def carries_tool_output(message: UIMessage) -> bool:
    """A client tool's output, as useChat's ``addToolResult`` re-sends the assistant message."""
    return any(p["type"].startswith("tool-") and p.get("state") in TOOL_OUTPUT_STATES for p in message.parts)
