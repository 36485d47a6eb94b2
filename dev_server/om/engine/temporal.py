"""The gap reminders of ``temporalMarkers``, as Mastra stores them (docs/observational-memory.md#temporal-markers).

When the turn's newest input is a user message and the window's message before it (a
marker excepted) is ``TEMPORAL_GAP_MS`` (10 minutes) or more older, a *signal* is stored
right after that message: role ``signal``, type ``system-reminder``, id
``__temporal_gap_<uuid>``, one text part ``25 minutes later — 01/05/2026, 9:27 AM UTC``
and, in ``metadata.signal``, its tag, attributes and metadata (``gapText``, ``gapMs``,
``timestamp``, ``timestampMs``, ``precedesMessageId``). The actor reads it as a user
message ``<system-reminder type="temporal-gap" …>…</system-reminder>``
(``dev_server.kernel.convert``), the observer as ``Signal: …``, and the token counter
counts it as any message. The gap follows the messages' ``createdAt``, which the app's
clock stamped (``dev_server.kernel.clock``), so a test moves that clock to make a gap.

Gap text: under an hour, minutes rounded to the nearest (``25 minutes later``); then the
two largest units, each floored (``2 hours 5 minutes later``, ``3 days later``, ``1 week
2 days later``; months of 30 days, years of 365). The time is the user message's, in the
process's zone, written en-US (``01/05/2026, 9:27 AM UTC``).

Replies stored before this form hold a user message 1 ms before the message instead
(``metadata.mastra.temporalGap``); it still counts as a marker, so none is added twice.
"""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo
from typing import Any

from dev_server.kernel import ids
from dev_server.kernel.clock import parse_iso, to_iso
from dev_server.kernel.messages import Message

TEMPORAL_GAP_MS = 10 * 60_000
REMINDER_TYPE = "temporal-gap"
MARKER_ID_PREFIX = "__temporal_"

_MINUTE = 60_000
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
_WEEK = 7 * _DAY
_MONTH = 30 * _DAY
_YEAR = 365 * _DAY
# the short zone names en-US writes as such; any other zone is written as its offset (GMT+1)
_US_ZONE_NAMES = {"UTC", "GMT", "EST", "EDT", "CST", "CDT", "MST", "MDT", "PST", "PDT", "AKST", "AKDT", "HST"}


def format_gap(gap_ms: int) -> str | None:
    """``25 minutes later``, ``2 hours 5 minutes later`` ...; None under ``TEMPORAL_GAP_MS``."""
    if gap_ms < TEMPORAL_GAP_MS:
        return None
    if gap_ms < _HOUR:
        return f"{_unit(max(1, _round_half_up(gap_ms / _MINUTE)), 'minute')} later"
    for limit, primary, primary_name, secondary, secondary_name in (
            (_DAY, _HOUR, "hour", _MINUTE, "minute"), (_WEEK, _DAY, "day", _HOUR, "hour"),
            (_MONTH, _WEEK, "week", _DAY, "day"), (_YEAR, _MONTH, "month", _WEEK, "week"),
            (None, _YEAR, "year", _MONTH, "month")):
        if limit is None or gap_ms < limit:
            first = gap_ms // primary
            second = (gap_ms - first * primary) // secondary
            parts = [_unit(first, primary_name)] + ([_unit(second, secondary_name)] if second > 0 else [])
            return f"{' '.join(parts)} later"
    raise AssertionError("unreachable")


def format_timestamp(moment: datetime, tz: tzinfo | None = None) -> str:
    """``01/05/2026, 9:27 AM UTC``: en-US, 12-hour, with the zone's short name."""
    local = moment.astimezone(tz) if tz is not None else moment.astimezone()
    hour = local.hour % 12 or 12
    return (f"{local.month:02d}/{local.day:02d}/{local.year}, {hour}:{local.minute:02d} "
            f"{'AM' if local.hour < 12 else 'PM'} {_zone_name(local)}")


def is_gap_marker(message: Message) -> bool:
    """A gap reminder: a signal (``__temporal_…`` id), or the user message stored before it was one."""
    if message.id.startswith(MARKER_ID_PREFIX):
        return True
    metadata = message.content.get("metadata") or {}
    return bool((metadata.get("mastra") or {}).get("temporalGap")) if isinstance(metadata, dict) else False


def marks(marker: Message, message_id: str) -> bool:
    """Whether ``marker`` is the gap reminder of the message ``message_id``."""
    signal = ((marker.content.get("metadata") or {}).get("signal") or {})
    if (signal.get("attributes") or {}).get("precedesMessageId") == message_id:
        return True
    legacy = ((marker.content.get("metadata") or {}).get("mastra") or {}).get("temporalGap") or {}
    return legacy.get("messageId") == message_id


def gap_signal(newest: Message, previous: Message, created_at: str, tz: tzinfo | None = None) -> Message | None:
    """The reminder to store after ``newest`` (stamped ``created_at``), or None when the
    silence since ``previous`` was shorter than ``TEMPORAL_GAP_MS``."""
    timestamp_ms = part_time_ms(newest, first=True)
    gap_ms = timestamp_ms - part_time_ms(previous, first=False)
    gap_text = format_gap(gap_ms)
    if gap_text is None:
        return None
    accepted = datetime.fromtimestamp(timestamp_ms / 1000, tz=parse_iso(newest.created_at).tzinfo)
    timestamp = format_timestamp(accepted, tz)
    text = f"{gap_text} — {timestamp}"
    attributes = {"type": REMINDER_TYPE, "gapText": gap_text, "gapMs": gap_ms, "timestamp": timestamp,
                  "timestampMs": timestamp_ms, "precedesMessageId": newest.id}
    signal_id = f"{MARKER_ID_PREFIX}gap_{ids.uuid4()}"
    metadata = {"reminderType": REMINDER_TYPE, "gapText": gap_text, "gapMs": gap_ms, "timestamp": timestamp,
                "timestampMs": timestamp_ms, "precedesMessageId": newest.id,
                "systemReminder": {**attributes, "message": text}}
    signal = {"id": signal_id, "type": "reactive", "tagName": "system-reminder", "createdAt": created_at,
              "acceptedAt": to_iso(accepted), "attributes": attributes, "metadata": metadata}
    content = {"format": 2, "parts": [{"type": "text", "text": text}], "metadata": {"signal": signal}}
    return Message(signal_id, newest.thread_id, newest.resource_id, "signal", content, created_at,
                   type="system-reminder")


def signal_part_data(marker: Message) -> dict[str, Any]:
    """The ``data-signal`` part that streams a stored signal (Mastra's ``toDataPart``)."""
    signal = dict(marker.content["metadata"]["signal"])
    text = "".join(p.get("text", "") for p in marker.content.get("parts") or () if p.get("type") == "text")
    return {"id": signal["id"], "type": signal["type"], "tagName": signal["tagName"], "contents": text,
            "createdAt": signal["createdAt"], "acceptedAt": signal["acceptedAt"],
            "attributes": signal["attributes"], "metadata": signal["metadata"]}


def part_time_ms(message: Message, *, first: bool) -> int:
    """The first (last) part's ``createdAt`` in ms when the parts carry one, else the message's."""
    stamps = [p["createdAt"] for p in message.content.get("parts") or ()
              if isinstance(p, dict) and isinstance(p.get("createdAt"), (int, float))
              and not isinstance(p.get("createdAt"), bool)]
    if stamps:
        return int(stamps[0] if first else stamps[-1])
    return int(parse_iso(message.created_at).timestamp() * 1000)


def _unit(value: int, name: str) -> str:
    return f"{value} {name}{'' if value == 1 else 's'}"


def _round_half_up(value: float) -> int:
    """JavaScript's ``Math.round`` for positive values."""
    return int(value + 0.5)


def _zone_name(local: datetime) -> str:
    name = local.tzname() or ""
    if name in _US_ZONE_NAMES:
        return name
    offset = local.utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds() // 60)
    if minutes == 0:
        return "GMT"
    sign, minutes = ("+" if minutes > 0 else "-"), abs(minutes)
    return f"GMT{sign}{minutes // 60}" + (f":{minutes % 60:02d}" if minutes % 60 else "")
