"""Context injection (dev_server.om.prompting.context, dev_server.om.prompting.relative_time;
docs/observational-memory.md#context, #manual-api).

Pure functions, checked directly: each optimisation rule on its own, relative dates and
gap lines against a fixed "now", the order and count of the injected system messages,
chunking on message boundaries, the continuation reminder, and observations as of a time.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from dev_server.om.prompting.context import (
    END_OTHER_CONVERSATIONS_BLOCK,
    OBSERVATION_CONTEXT_INSTRUCTIONS,
    OBSERVATION_CONTEXT_PROMPT,
    OBSERVATION_CONTINUATION_HINT,
    START_OTHER_CONVERSATIONS_BLOCK,
    build_context_system_message,
    build_context_system_messages,
    continuation_message,
    continuation_model_message,
    message_boundary,
    observations_as_of,
    optimize_observations_for_context,
    split_observation_chunks,
)
from dev_server.om.prompting.relative_time import (
    add_relative_time_to_observations,
    gap_line,
    parse_mentioned_date,
    relative_phrase,
)

NOW = datetime(2025, 12, 10, 15, 30, tzinfo=UTC)
TODAY = NOW.date()
BOUNDARY_1 = "\n\n--- message boundary (2025-12-05T10:00:00.000Z) ---\n\n"
BOUNDARY_2 = "\n\n--- message boundary (2025-12-08T18:45:12.345Z) ---\n\n"


def header(day: date) -> str:
    return f"Date: {day.strftime('%b')} {day.day}, {day.year}"


# --- optimisation, rule by rule ---------------------------------------------------------

def test_minor_priority_emojis_go_with_their_whitespace_critical_and_done_stay() -> None:
    text = ("* 🟡 (10:00) likes tea\n* 🟢  (10:05) has a cat\n"
            "* 🔴 (10:10) allergic to nuts\n* ✅ (10:15) booked")
    assert optimize_observations_for_context(text) == (
        "* (10:00) likes tea\n* (10:05) has a cat\n* 🔴 (10:10) allergic to nuts\n* ✅ (10:15) booked")


def test_anchor_ids_are_stripped_at_line_start_keeping_indentation() -> None:
    text = "[O12] * 🔴 (09:00) moved to Berlin\n  [O3-N2] * -> packed boxes"
    assert optimize_observations_for_context(text) == "* 🔴 (09:00) moved to Berlin\n * packed boxes"


def test_bracket_tags_go_but_collapsed_markers_and_links_stay() -> None:
    text = ("* (10:00) prefers rust [preference, language]\n"
            "* [72 items collapsed - ID: b1fa]\n"
            "* [3 items collapsed]\n"
            "* read [the guide](https://example.com/guide) [docs]")
    assert optimize_observations_for_context(text) == (
        "* (10:00) prefers rust \n"  # the rule deletes the tag only, as Mastra's does
        "* [72 items collapsed - ID: b1fa]\n"
        "* [3 items collapsed]\n"
        "* read [the guide](https://example.com/guide)")


def test_a_bracket_never_spans_lines() -> None:
    text = "* note [unclosed\n* keep this line]"
    assert optimize_observations_for_context(text) == text


def test_arrows_become_one_space_even_across_lines() -> None:
    assert optimize_observations_for_context("ran tests -> 3 failed") == "ran tests 3 failed"
    assert optimize_observations_for_context("* ran tests\n  -> fixed import") == "* ran tests fixed import"
    assert optimize_observations_for_context("a->b") == "a b"


def test_spaces_and_newlines_collapse_and_the_text_is_trimmed() -> None:
    text = "\n\n  * one    two\n    * nested\n\n\n\n* three  \n\n"
    assert optimize_observations_for_context(text) == "* one two\n * nested\n\n* three"


def test_message_boundaries_survive_optimisation() -> None:
    text = f"* 🟡 first ->{BOUNDARY_1}-> [tag] second{BOUNDARY_2}third"
    optimized = optimize_observations_for_context(text)
    assert optimized == f"* first{BOUNDARY_1}second{BOUNDARY_2}third"
    assert split_observation_chunks(optimized) == ["* first", "second", "third"]


def test_a_chunk_emptied_by_optimisation_is_dropped_with_its_boundary() -> None:
    assert optimize_observations_for_context(f"first{BOUNDARY_1}[only a tag]{BOUNDARY_2}third") == (
        f"first{BOUNDARY_2}third")
    assert optimize_observations_for_context(f"[tag]{BOUNDARY_1}second") == "second"


def test_gap_lines_pass_a_second_optimisation() -> None:
    assert optimize_observations_for_context("[3 days later]\n\nDate: Dec 8, 2025") == (
        "[3 days later]\n\nDate: Dec 8, 2025")


# --- relative dates ---------------------------------------------------------------------

@pytest.mark.parametrize(("days_ago", "phrase"), [
    (0, "today"), (1, "yesterday"), (2, "2 days ago"), (6, "6 days ago"), (7, "1 week ago"),
    (13, "1 week ago"), (14, "2 weeks ago"), (29, "4 weeks ago"), (30, "1 month ago"),
    (59, "1 month ago"), (60, "2 months ago"), (364, "12 months ago"), (365, "1 year ago"),
    (800, "2 years ago"),
    (-1, "tomorrow"), (-3, "in 3 days"), (-7, "in 1 week"), (-20, "in 2 weeks"),
    (-45, "in 1 month"), (-90, "in 3 months"), (-365, "in 1 year"), (-731, "in 2 years"),
])
def test_relative_phrase_thresholds(days_ago: int, phrase: str) -> None:
    assert relative_phrase(TODAY - timedelta(days=days_ago), TODAY) == phrase


def test_date_headers_gain_their_relative_phrase() -> None:
    text = "Date: Dec 9, 2025\n* a\n\nDate: Dec 10, 2025\n* b\n\nDate: Dec 11, 2025\n* c"
    assert add_relative_time_to_observations(text, NOW) == (
        "Date: Dec 9, 2025 (yesterday)\n* a\n\nDate: Dec 10, 2025 (today)\n* b\n\n"
        "Date: Dec 11, 2025 (tomorrow)\n* c")


def test_full_month_names_and_naive_now_work() -> None:
    text = "Date: December 3, 2025\n* a"
    assert add_relative_time_to_observations(text, datetime(2025, 12, 10, 23, 59)) == (
        "Date: December 3, 2025 (1 week ago)\n* a")


def test_only_whole_header_lines_are_dated() -> None:
    text = "* said Date: Dec 4, 2025 in passing\nDate: Dec 4, 2025 (today)\nDate: Foo 4, 2025"
    assert add_relative_time_to_observations(text, NOW) == text


@pytest.mark.parametrize(("days", "line"), [
    (1, None), (0, None), (-5, None), (2, "[2 days later]"), (6, "[6 days later]"),
    (7, "[1 week later]"), (21, "[3 weeks later]"), (45, "[1 month later]"),
    (90, "[3 months later]"), (400, "[13 months later]"),
])
def test_gap_line_thresholds(days: int, line: str | None) -> None:
    assert gap_line(TODAY, TODAY + timedelta(days=days)) == line


def test_gap_lines_sit_between_distant_headers_on_their_own_paragraph() -> None:
    text = "Date: Nov 1, 2025\n* a\n\nDate: Nov 2, 2025\n* b\nDate: Nov 20, 2025\n* c"
    assert add_relative_time_to_observations(text, NOW) == (
        "Date: Nov 1, 2025 (1 month ago)\n* a\n\n"
        "Date: Nov 2, 2025 (1 month ago)\n* b\n\n[2 weeks later]\n\n"
        "Date: Nov 20, 2025 (2 weeks ago)\n* c")


def test_a_gap_across_a_boundary_starts_the_next_chunk() -> None:
    text = f"Date: Dec 1, 2025\n* a{BOUNDARY_1}Date: Dec 5, 2025\n* b"
    dated = add_relative_time_to_observations(text, NOW)
    assert split_observation_chunks(dated) == [
        "Date: Dec 1, 2025 (1 week ago)\n* a",
        "[4 days later]\n\nDate: Dec 5, 2025 (5 days ago)\n* b",
    ]


def test_inline_meaning_without_future_intent_gets_the_relative_date_only() -> None:
    text = "* (14:00) User visited Rome (meaning Nov 26, 2025)"
    assert add_relative_time_to_observations(text, NOW) == (
        "* (14:00) User visited Rome (meaning Nov 26, 2025 - 2 weeks ago)")


@pytest.mark.parametrize("intent", [
    "will fly", "plans to fly", "is going to fly", "wants to fly", "needs to fly", "is about to fly",
    "is looking forward to flying", "intends to fly", "is planning to fly",
])
def test_past_planned_dates_are_likely_done(intent: str) -> None:
    text = f"* (09:00) User {intent} to Lisbon (meaning Dec 3, 2025)"
    assert add_relative_time_to_observations(text, NOW) == (
        f"* (09:00) User {intent} to Lisbon (meaning Dec 3, 2025 - 1 week ago, likely already happened)")


def test_intent_for_today_or_later_is_not_called_done() -> None:
    text = ("* User will call the bank (meaning Dec 10, 2025)\n"
            "* User plans to move (Estimated Jan 15, 2026)")
    assert add_relative_time_to_observations(text, NOW) == (
        "* User will call the bank (meaning Dec 10, 2025 - today)\n"
        "* User plans to move (Estimated Jan 15, 2026 - in 1 month)")


def test_intent_is_read_on_the_same_line_before_the_date_only() -> None:
    text = "* User will travel soon\n* User travelled (meaning Dec 3, 2025) and will rest"
    assert add_relative_time_to_observations(text, NOW) == (
        "* User will travel soon\n* User travelled (meaning Dec 3, 2025 - 1 week ago) and will rest")


@pytest.mark.parametrize(("written", "parsed"), [
    ("May 30, 2025", date(2025, 5, 30)),
    ("Friday May 30 2025", date(2025, 5, 30)),
    ("May 27-28, 2025", date(2025, 5, 27)),
    ("early May 2025", date(2025, 5, 7)),
    ("mid-May 2025", date(2025, 5, 15)),
    ("mid-to-late May 2025", date(2025, 5, 15)),  # the first word of the span counts
    ("late Sept 2025", date(2025, 9, 23)),
    ("April to May 2025", date(2025, 5, 1)),
    ("the weekend of 2025", None),
    ("Feb 30, 2025", None),
])
def test_inline_date_forms(written: str, parsed: date | None) -> None:
    assert parse_mentioned_date(written) == parsed


def test_unparseable_inline_dates_are_left_as_written() -> None:
    text = "* User will relax (meaning sometime in 2025) (estimated Q3 2024)"
    assert add_relative_time_to_observations(text, NOW) == text


# --- chunks -----------------------------------------------------------------------------

def test_split_on_message_boundaries_trims_and_drops_empty_chunks() -> None:
    text = f"\n first \n{BOUNDARY_1}second{BOUNDARY_2}  {BOUNDARY_1}third\n"
    assert split_observation_chunks(text) == ["first", "second", "third"]


def test_only_real_boundaries_split() -> None:
    text = ("a\n--- message boundary (2025-12-05T10:00:00.000Z) ---\nb\n\n"
            "--- message boundary (yesterday) ---\n\nc")
    assert split_observation_chunks(text) == [text]
    assert split_observation_chunks("   ") == []


def test_message_boundary_writes_the_iso_the_splitter_reads() -> None:
    moment = datetime(2025, 12, 5, 10, 0, tzinfo=UTC)
    assert message_boundary(moment) == BOUNDARY_1
    assert split_observation_chunks(f"a{message_boundary(moment)}b") == ["a", "b"]


def test_message_boundary_takes_naive_times_as_utc_and_strings_as_written() -> None:
    assert message_boundary(datetime(2025, 12, 5, 10, 0)) == BOUNDARY_1
    assert message_boundary("2025-12-08T18:45:12.345Z") == BOUNDARY_2


# --- system messages --------------------------------------------------------------------

OBSERVATIONS = (f"Date: Dec 9, 2025\n* 🟡 (10:00) likes tea [pref]{BOUNDARY_1}"
                "Date: Dec 10, 2025\n* 🔴 (11:00) moved")


def test_messages_in_order_without_a_closing_tag() -> None:
    messages = build_context_system_messages(
        OBSERVATIONS, now=NOW, current_task="Fix the bug", suggested_response="Ask about tests")
    assert messages == [
        f"{OBSERVATION_CONTEXT_PROMPT}\n\n{OBSERVATION_CONTEXT_INSTRUCTIONS}",
        "<observations>",
        "Date: Dec 9, 2025 (yesterday)\n* (10:00) likes tea",
        "Date: Dec 10, 2025 (today)\n* 🔴 (11:00) moved",
        "<current-task>\nFix the bug\n</current-task>",
        "<suggested-response>\nAsk about tests\n</suggested-response>",
    ]
    assert not any("</observations>" in message for message in messages)


def test_other_conversations_and_retrieval_instructions() -> None:
    messages = build_context_system_messages(
        "* a", now=NOW, retrieval_instructions="Use the recall tool.",
        other_conversations=[("t-2", "User: hi"), ("t-3", "User: bye\nAssistant: ok")])
    assert len(messages) == 4
    assert messages[0].endswith(f"{OBSERVATION_CONTEXT_INSTRUCTIONS}\n\nUse the recall tool.")
    preface, rest = messages[1].split("\n", 1)
    assert "OTHER conversations" in preface
    assert rest == (f"{START_OTHER_CONVERSATIONS_BLOCK}\n"
                    '<other-conversation id="t-2">\nUser: hi\n</other-conversation>\n\n'
                    '<other-conversation id="t-3">\nUser: bye\nAssistant: ok\n</other-conversation>\n'
                    f"{END_OTHER_CONVERSATIONS_BLOCK}")
    assert messages[2:] == ["<observations>", "* a"]


def test_no_observations_no_messages() -> None:
    assert build_context_system_messages("", now=NOW) == []
    assert build_context_system_messages(" \n\n ", now=NOW, current_task="t") == []
    assert build_context_system_messages("", now=NOW, retrieval_instructions="Recall.") == ["Recall."]
    assert build_context_system_message("", now=NOW) == ""


def test_blank_hints_and_an_empty_other_conversations_list_add_nothing() -> None:
    messages = build_context_system_messages(
        "* a", now=NOW, current_task="  ", suggested_response="", other_conversations=[])
    assert messages == [f"{OBSERVATION_CONTEXT_PROMPT}\n\n{OBSERVATION_CONTEXT_INSTRUCTIONS}",
                        "<observations>", "* a"]


def test_single_message_form_joins_the_list() -> None:
    messages = build_context_system_messages(OBSERVATIONS, now=NOW, current_task="t")
    assert build_context_system_message(OBSERVATIONS, now=NOW, current_task="t") == "\n\n".join(messages)


def test_instructions_cover_the_five_topics() -> None:
    paragraphs = OBSERVATION_CONTEXT_INSTRUCTIONS.split("\n\n")
    assert len(paragraphs) == 5
    for paragraph, topic in zip(paragraphs[1:], ["KNOWLEDGE UPDATES", "PLANNED ACTIONS",
                                                  "MOST RECENT USER INPUT", "SYSTEM REMINDERS"], strict=True):
        assert paragraph.startswith(topic)
    assert "<system-reminder>" in paragraphs[4]


# --- continuation -----------------------------------------------------------------------

def test_continuation_message_shapes() -> None:
    content = f"<system-reminder>{OBSERVATION_CONTINUATION_HINT}</system-reminder>"
    assert continuation_message() == {"id": "om-continuation", "role": "user",
                                      "created_at": "1970-01-01T00:00:00.000Z", "content": content}
    assert continuation_model_message() == {"role": "user", "content": content}


# --- observations as of a time ----------------------------------------------------------

ACTIVE = f"first{BOUNDARY_1}second{BOUNDARY_2}third"


@pytest.mark.parametrize(("as_of", "expected"), [
    (datetime(2025, 12, 1, tzinfo=UTC), "first"),
    (datetime(2025, 12, 5, 10, 0, tzinfo=UTC), f"first{BOUNDARY_1}second"),
    (datetime(2025, 12, 8, 18, 45, 12, 344000, tzinfo=UTC), f"first{BOUNDARY_1}second"),
    (datetime(2025, 12, 8, 18, 45, 12, 345000, tzinfo=UTC), ACTIVE),
    (datetime(2025, 12, 6, 0, 0), f"first{BOUNDARY_1}second"),  # naive: UTC
    (datetime(2025, 12, 5, 11, 0, tzinfo=timezone(timedelta(hours=2))), "first"),  # 09:00Z
])
def test_observations_as_of(as_of: datetime, expected: str) -> None:
    assert observations_as_of(ACTIVE, as_of) == expected


def test_observations_as_of_edge_cases() -> None:
    late = datetime(2026, 1, 1, tzinfo=UTC)
    assert observations_as_of("   ", late) == ""
    assert observations_as_of(f"first{BOUNDARY_1}   {BOUNDARY_2}third", late) == f"first{BOUNDARY_2}third"
    bad = "first\n\n--- message boundary (2025-13-45T10:00:00.000Z) ---\n\nsecond"
    assert observations_as_of(bad, late) == "first"
