"""Temporal markers as Mastra stores them (``dev_server.om.engine.temporal``): a ``signal``
message stored after the user message that follows a silence, its gap text rounded as
Mastra rounds it, read by the actor as a user ``<system-reminder type="temporal-gap" …>``
after the user's text, by the observer as ``Signal: …``, and counted as any message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dev_server.kernel.clock import ManualClock
from dev_server.kernel.convert import stored_to_model
from dev_server.kernel.messages import Message
from dev_server.llm.scripted import ScriptedModel
from dev_server.om.engine.temporal import format_gap, format_timestamp, gap_signal, is_gap_marker, marks
from dev_server.om.prompting.transcript import format_transcript
from dev_server.om.tokens.counting import count_message, estimate_tokens
from tests.kit.chat import turn
from tests.kit.servers import serve

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def message(mid: str, role: str, at: str, text: str = "Hello again") -> Message:
    return Message(mid, "t", "r", role, {"format": 2, "parts": [{"type": "text", "text": text}], "content": text}, at)


@pytest.mark.parametrize(("gap_ms", "text"), [
    (10 * MINUTE - 1, None),
    (10 * MINUTE, "10 minutes later"),
    (24 * MINUTE + 29_999, "24 minutes later"),
    (24 * MINUTE + 30_000, "25 minutes later"),  # the nearest minute, not floored
    (59 * MINUTE + 59_999, "60 minutes later"),
    (HOUR, "1 hour later"),
    (HOUR + 29 * MINUTE + 59_000, "1 hour 29 minutes later"),  # then each unit floored
    (2 * DAY + 5 * HOUR + 30 * MINUTE, "2 days 5 hours later"),
    (3 * DAY, "3 days later"),
    (9 * DAY, "1 week 2 days later"),
    (45 * DAY, "1 month 2 weeks later"),
    (400 * DAY, "1 year 1 month later"),
])
def test_the_gap_text_is_mastras(gap_ms: int, text: str | None) -> None:
    assert format_gap(gap_ms) == text


def test_the_timestamp_is_written_en_us_with_the_zone() -> None:
    moment = datetime(2026, 1, 5, 9, 27, tzinfo=UTC)
    assert format_timestamp(moment, UTC) == "01/05/2026, 9:27 AM UTC"
    assert format_timestamp(datetime(2026, 1, 5, 21, 3, tzinfo=UTC), UTC) == "01/05/2026, 9:03 PM UTC"
    assert format_timestamp(moment, __import__("zoneinfo").ZoneInfo("Europe/Berlin")) == "01/05/2026, 10:27 AM GMT+1"


def test_the_signal_is_stored_read_by_the_actor_and_the_observer_and_counted() -> None:
    before = message("a1", "assistant", "2026-01-05T09:02:00.000Z", "Noted.")
    user = message("u2", "user", "2026-01-05T09:27:00.000Z")
    assert gap_signal(message("u2", "user", "2026-01-05T09:11:59.999Z"), before, "2026-01-05T09:12:00.000Z") is None
    signal = gap_signal(user, before, "2026-01-05T09:27:00.000Z", UTC)
    assert signal is not None and is_gap_marker(signal) and marks(signal, "u2")
    text = "25 minutes later — 01/05/2026, 9:27 AM UTC"
    assert (signal.role, signal.type, signal.created_at) == ("signal", "system-reminder", "2026-01-05T09:27:00.000Z")
    assert signal.id.startswith("__temporal_gap_") and signal.content["parts"] == [{"type": "text", "text": text}]
    stored = signal.content["metadata"]["signal"]
    attributes = {"type": "temporal-gap", "gapText": "25 minutes later", "gapMs": 1_500_000,
                  "timestamp": "01/05/2026, 9:27 AM UTC", "timestampMs": 1767605220000, "precedesMessageId": "u2"}
    described = {k: v for k, v in attributes.items() if k != "type"}
    assert stored == {"id": signal.id, "type": "reactive", "tagName": "system-reminder",
                      "createdAt": "2026-01-05T09:27:00.000Z", "acceptedAt": "2026-01-05T09:27:00.000Z",
                      "attributes": attributes,
                      "metadata": {"reminderType": "temporal-gap", **described,
                                   "systemReminder": {**attributes, "message": text}}}
    # the actor: a user message, the text in its tag with the attributes in their order
    assert stored_to_model(signal) == {"role": "user", "content": (
        '<system-reminder type="temporal-gap" gapText="25 minutes later" gapMs="1500000" '
        'timestamp="01/05/2026, 9:27 AM UTC" timestampMs="1767605220000" precedesMessageId="u2">'
        f"{text}</system-reminder>")}
    # the observer: a "Signal" line after the user's
    transcript, _ = format_transcript([before, user, signal], tz=UTC)
    assert transcript.splitlines() == ["Jan 5 2026:", "Assistant (9:02 AM): Noted.", "User (9:27 AM): Hello again",
                                       f"Signal: {text}"]
    # counted as any message: its role, its text and the framing (the old reminder cost ~36 more)
    assert count_message(signal) == round(estimate_tokens("signal") + estimate_tokens(text) + 3.8) == 21


@pytest.mark.anyio
async def test_a_gap_reaches_the_actor_after_the_users_text(tmp_path: Path) -> None:
    clock = ManualClock("2026-01-05T09:00:00.000Z")
    model = ScriptedModel(["Noted.", "Welcome back."])
    options = {"temporalMarkers": True, "observation": {"messageTokens": 30_000, "bufferTokens": False}}
    with serve("gateway", tmp_path, inprocess=True, settings={"telemetry": False, "om_options": options},
               llm=model, clock=clock) as server:
        turn(server, "gapped", "u1", "I keep bees on my roof.")
        clock.advance(timedelta(minutes=24, seconds=30))
        result = turn(server, "gapped", "u2", "Hello again")
    status = next(c["data"] for c in result["chunks"] if c["type"] == "data-om-status")
    [signal] = [c["data"] for c in result["chunks"] if c["type"] == "data-signal"]
    assert signal["contents"] == "25 minutes later — 01/05/2026, 9:24 AM UTC"
    sent: list[dict[str, Any]] = model.requests_for("agent")[-1].messages
    assert sent[-2] == {"role": "user", "content": "Hello again"}
    assert sent[-1]["role"] == "user" and sent[-1]["content"].startswith('<system-reminder type="temporal-gap" ')
    assert sent[-1]["content"].endswith(f'>{signal["contents"]}</system-reminder>')
    # the window counts it as a message of its own: user, reply, user, signal
    assert status["windows"]["active"]["messages"]["tokens"] == 24 + sum(
        round(estimate_tokens(role) + estimate_tokens(text) + 3.8) for role, text in (
            ("user", "I keep bees on my roof."), ("assistant", "Noted."), ("user", "Hello again"),
            ("signal", signal["contents"])))
