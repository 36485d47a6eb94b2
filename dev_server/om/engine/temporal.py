"""The gap reminders of ``temporalMarkers``: they follow the stored messages' ``createdAt``,
which the app's clock stamped (``dev_server.kernel.clock``), so a test moves that clock to
make a gap without waiting.

With ``temporalMarkers`` a user message that comes ``TEMPORAL_GAP_MS`` (10 minutes) or
more after the message before it gets a reminder stored just before it (1 ms older): a
user message whose text is a ``<system-reminder>`` naming the gap, marked in
``metadata.mastra.temporalGap`` so it is never mistaken for the user's words. The model and
the observer read it like any other message, so "the user came back three days later" is
part of what gets observed.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from dev_server.kernel.clock import parse_iso, to_iso
from dev_server.kernel.messages import Message

TEMPORAL_GAP_MS = 10 * 60_000


def describe_gap(gap_ms: int) -> str:
    minutes = gap_ms // 60_000
    if minutes < 60:
        return f"{minutes} minutes"
    hours = minutes // 60
    if hours < 48:
        return f"{hours} hour{'s' if hours != 1 else ''}" + (f" {minutes % 60} minutes" if hours < 6 and minutes % 60
                                                              else "")
    days = hours // 24
    if days < 14:
        return f"{days} days"
    return f"{days // 7} weeks"


def is_gap_marker(message: Message) -> bool:
    metadata = message.content.get("metadata") or {}
    return bool((metadata.get("mastra") or {}).get("temporalGap")) if isinstance(metadata, dict) else False


def gap_marker(newest: Message, previous: Message) -> Message | None:
    """The reminder to store before ``newest``, or None when the silence was shorter."""
    newest_at = parse_iso(newest.created_at)
    gap_ms = int((newest_at - parse_iso(previous.created_at)).total_seconds() * 1000)
    if gap_ms < TEMPORAL_GAP_MS:
        return None
    text = (f"<system-reminder>{describe_gap(gap_ms)} passed between the previous message and the next one "
            f"(the user wrote again at {newest.created_at}).</system-reminder>")
    gap: dict[str, Any] = {"gapMs": gap_ms, "previousMessageAt": previous.created_at,
                           "messageAt": newest.created_at, "messageId": newest.id, "text": text}
    content = {"format": 2, "parts": [{"type": "text", "text": text}], "content": text,
               "metadata": {"mastra": {"temporalGap": gap}}}
    return Message(f"temporal-gap-{uuid.uuid4()}", newest.thread_id, newest.resource_id, "user", content,
                   to_iso(newest_at - timedelta(milliseconds=1)))
