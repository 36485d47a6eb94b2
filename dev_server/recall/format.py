"""How recalled messages are shown to the model, in Mastra's words.

Messages of other threads become one system message (Mastra's ``formatCrossThreadMessages``):
a date line whenever the date changes, then ``Message from previous conversation at
<h:mm AM>: <Role>: <text>`` per message, all inside
``<remembered_from_other_conversation>`` ... ``<end_remembered_from_other_conversation>``.
Dates and times are UTC. Mastra writes the messages of one date without a separator; here
each is on its own line, which a model reads more easily and no client parses.
"""

from __future__ import annotations

from datetime import UTC, datetime

from dev_server.kernel.messages import Message
from dev_server.recall.text import message_text

_ROLE_ORDER = {"system": 0, "user": 1, "assistant": 2, "tool": 3}
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def recall_order(messages: list[Message]) -> list[Message]:
    """Mastra's order: created time, thread, role (user before assistant), id."""
    return sorted(messages, key=lambda m: (m.created_at, m.thread_id, _ROLE_ORDER.get(m.role, 4), m.id))


def _moment(iso: str) -> datetime:
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return datetime.now(UTC)


def other_threads_message(messages: list[Message], current_thread_id: str) -> str:
    lines: list[str] = []
    last_day = None
    for message in messages:
        text = message_text(message.content)
        if not text:
            continue
        moment = _moment(message.created_at)
        day = f"{moment.year}, {_MONTHS[moment.month - 1]}, {moment.day}"
        if day != last_day:
            lines.append(f"\nthe following messages are from {day}")
            last_day = day
        hour = moment.hour % 12 or 12
        time = f"{hour}:{moment.minute:02d} {'AM' if moment.hour < 12 else 'PM'}"
        where = "from previous conversation" if message.thread_id != current_thread_id else ""
        lines.append(f"Message {where} at {time}: {message.role.capitalize()}: {text}")
    body = "\n".join(lines)
    return ("The following messages were remembered from a different conversation:\n"
            f"<remembered_from_other_conversation>\n{body}\n<end_remembered_from_other_conversation>")
