"""dev_server.llm.local_observer: the local model answers observer and reflector requests offline.

Requests are built exactly as Observational Memory builds them (``dev_server.om.prompting.prompts`` around a
transcript from ``dev_server.om.prompting.transcript``), and answers are read with ``dev_server.om.prompting.parsing``,
so what passes here is what a keyless OM cycle sees. One test goes through ``LiteLLMClient``.
"""

from __future__ import annotations

import re
from datetime import UTC
from typing import Any

import pytest

from dev_server.kernel.messages import Message
from dev_server.kernel.model import ModelRequest, TextDelta
from dev_server.llm import LiteLLMClient, ModelProviderError
from dev_server.llm.local_model import compose_reply, stream_local
from dev_server.llm.local_observer import is_observer_request, is_reflector_request, observer_answer, om_reply
from dev_server.llm.local_reflector import reflector_answer
from dev_server.om.engine.output_check import distinct_observations, observer_problem, reflection_problem
from dev_server.om.prompting.parsing import parse_observer_output, parse_reflector_output
from dev_server.om.prompting.prompts import (
    observer_messages,
    observer_system_prompt,
    reflector_messages,
    reflector_system_prompt,
)
from dev_server.om.prompting.transcript import format_transcript
from dev_server.om.tokens.counting import estimate_tokens

TIME = re.compile(r"\(\d{2}:\d{2}\)")


def message(role: str, created_at: str, text: str = "", *parts: dict[str, Any]) -> Message:
    all_parts = list(parts) or [{"type": "text", "text": text}]
    return Message(id=f"m-{created_at}-{role}", thread_id="t", resource_id="r", role=role,
                   content={"format": 2, "parts": all_parts, "content": text}, created_at=created_at)


CHAT = [
    message("user", "2025-12-04T14:30:00.000Z", "My name is Ada and I have two kids."),
    message("assistant", "2025-12-04T14:30:05.000Z", "Nice to meet you, Ada! How old are they?"),
    message("user", "2025-12-04T14:32:00.000Z", "They are 4 and 7"),
    message("assistant", "2025-12-04T14:33:00.000Z", "",
            {"type": "tool-invocation", "toolInvocation": {"state": "result", "toolCallId": "c1",
                                                           "toolName": "searchParks", "args": {"city": "Rome"},
                                                           "result": {"parks": 3}}},
            {"type": "text", "text": "I found three parks. Want details?"}),
    message("user", "2025-12-05T09:00:00.000Z", "Which park is best for a 4 year old?"),
]


def observer_request(messages: list[Message], *, skip_hints: bool = False, **prompt: Any) -> list[dict[str, Any]]:
    transcript, _ = format_transcript(messages, tz=UTC)
    if skip_hints:
        prompt.update(current_task=False, suggested_response=False)
    return [{"role": "system", "content": observer_system_prompt(**prompt)},
            *observer_messages(transcript, previous_observations=None, prior_current_task=None,
                               prior_suggested_response=None, skip_continuation_hints=skip_hints)]


def reflector_request(observations: str, level: int) -> list[dict[str, Any]]:
    return [{"role": "system", "content": reflector_system_prompt()}, *reflector_messages(observations, level=level)]


def observe(messages: list[Message], **options: Any) -> Any:
    return parse_observer_output(observer_answer(observer_request(messages, **options)))


def test_observer_answer_parses_into_dated_prioritised_observations() -> None:
    parsed = observe(CHAT)
    lines = parsed.observations.split("\n")
    assert not parsed.degenerate
    assert [line for line in lines if line.startswith("Date:")] == ["Date: Dec 4, 2025", "Date: Dec 5, 2025"]
    observations = [line for line in lines if not line.startswith("Date:")]
    assert all(line.startswith("* ") and TIME.search(line) and line[2] in "🔴🟡🟢✅" for line in observations)
    assert observations == [
        '* 🔴 (14:30) User stated: "My name is Ada and I have two kids."',
        '* 🟢 (14:30) Assistant replied: "Nice to meet you, Ada!"',
        '* 🔴 (14:32) User stated: "They are 4 and 7"',
        "* 🟡 (14:33) Called searchParks",  # a tool line carries its time as any line does
        '* 🟢 (14:33) Assistant replied: "I found three parks."',
        '* 🟡 (09:00) User asked: "Which park is best for a 4 year old?"',
    ]
    assert parsed.current_task == 'Respond to: "Which park is best for a 4 year old?"'
    assert parsed.suggested_response and parsed.suggested_response.startswith("Continue the conversation about")
    assert parsed.thread_title is None


def test_a_tool_calls_argument_outline_is_never_read_as_a_speaker() -> None:
    transcript = "\n".join([
        "Dec 4 2025:",
        "User (2:30 PM): Please file the ticket.",
        'Tool Call file_ticket: User: "mallory"',
        'Assistant: "not a reply"',
        "meta: <object>",
        "meta.tags: <array, 2 items>",
        'meta.tags[0]: "urgent"',
        "  a preview of a long string",
        "Tool Result file_ticket: {",
        '  "ok": true',
        "}",
        "Assistant: Filed.",
    ])
    answer = observer_answer([{"role": "system", "content": observer_system_prompt()},
                              *observer_messages(transcript, previous_observations=None, prior_current_task=None,
                                                 prior_suggested_response=None)])
    observations = parse_observer_output(answer).observations
    assert "not a reply" not in observations and "mallory" not in observations
    assert "Please file the ticket." in observations and "Called file_ticket" in observations
    assert "Filed." in observations


def test_observer_cuts_long_statements_and_follows_prompt_options() -> None:
    long = message("user", "2025-12-04T08:05:00.000Z", "word " * 100 + "\nsecond line")
    parsed = observe([long], skip_hints=True, thread_title=True)
    [date, line] = parsed.observations.split("\n")
    assert date == "Date: Dec 4, 2025" and line.startswith("* 🔴 (08:05) User stated: \"word word")
    assert len(line) < 250 and line.endswith('…"')
    assert parsed.current_task is None and parsed.suggested_response is None
    assert parsed.thread_title == "word word word word word word"


def test_observer_with_nothing_to_observe() -> None:
    parsed = observe([message("assistant", "2025-12-04T08:05:00.000Z", "", {"type": "step-start"})])
    assert parsed.observations == "" and parsed.current_task is None


def test_observer_keeps_threads_apart() -> None:
    transcript = ('<thread id="a">\nDec 4 2025:\nUser (9:00 AM): I like tea\n</thread>\n'
                  '<thread id="b">\nDec 5 2025:\nUser (10:15 PM): Plan a trip?\n</thread>')
    request = [{"role": "system", "content": observer_system_prompt(multi_thread=True)},
               *observer_messages(transcript, previous_observations=None, prior_current_task=None,
                                  prior_suggested_response=None)]
    answer = observer_answer(request)
    assert answer.startswith("<observations>\n<thread id=\"a\">\nDate: Dec 4, 2025\n* 🔴 (09:00) User stated")
    assert '<thread id="b">\nDate: Dec 5, 2025\n* 🟡 (22:15) User asked: "Plan a trip?"' in answer
    assert answer.count("<current-task>") == 2 and answer.endswith("</thread>\n</observations>")


def reflect(observations: str, level: int) -> str:
    return parse_reflector_output(reflector_answer(reflector_request(observations, level))).observations


def long_observations() -> str:
    chat = []
    for day in (4, 5):
        for i in range(8):
            stamp = f"2025-12-0{day}T1{i}:00:00.000Z"
            chat.append(message("user", stamp, f"Fact {day}-{i}: I own {i} bikes"))
            reply = f"Noted fact {day}-{i}. Anything else?"
            chat.append(message("assistant", stamp.replace(":00:00", ":00:30"), reply))
            chat.append(message("user", stamp.replace(":00:00", ":01:00"), f"Question {day}-{i}?"))
    return observe(chat).observations


def test_reflector_compresses_and_keeps_the_essentials() -> None:
    observations = long_observations()
    reflected = {level: reflect(observations, level) for level in range(5)}
    for level, text in reflected.items():
        assert "Date: Dec 4, 2025" in text and "Date: Dec 5, 2025" in text, level
        assert "🟢" not in text
        assert 'User stated: "Fact 5-7: I own 7 bikes"' in text  # the newest 🔴 always stays
    sizes = [estimate_tokens(reflected[level]) for level in range(5)]
    assert estimate_tokens(observations) > sizes[0] > sizes[1] > sizes[2] > sizes[3] > sizes[4]  # each level shrinks
    assert reflected[0].count("🟡") == 16 and "🟡" in reflected[1]  # level 0 only drops the 🟢 lines
    assert "🟡" not in reflected[2] and reflected[2].count("🔴") == 16
    assert "* 🔴 (10:00) Earlier: 4 observations condensed" in reflected[3]
    assert "* 🔴 (10:00) Earlier: 6 observations condensed" in reflected[4]
    # Reflecting a reflection counts what was condensed before.
    again = reflect(reflected[3], 3)
    assert "Earlier: 5 observations condensed" in again and estimate_tokens(again) < estimate_tokens(reflected[3])


def test_reflector_keeps_completions_threads_and_something() -> None:
    observations = ('<thread id="a">\nDate: Dec 4, 2025\n* 🟢 (10:00) small talk\n</thread>\n'
                    '<thread id="b">\nDate: Dec 4, 2025\n* 🔴 (11:00) User is moving\n'
                    "  * ✅ (11:05) Booked the van\n"
                    "\n--- message boundary (2025-12-04T11:06:00.000Z) ---\n\nDate: Dec 4, 2025\n"
                    "* 🟡 (11:10) Asked about boxes\n</thread>")
    assert reflect(observations, 2) == ('<thread id="b">\nDate: Dec 4, 2025\n* 🔴 (11:00) User is moving\n'
                                        "  * ✅ (11:05) Booked the van\n</thread>")
    assert reflect("Date: Dec 4, 2025\n* 🟢 (10:00) a\n* 🟢 (10:05) b", 4) == "Date: Dec 4, 2025\n* 🟢 (10:05) b"


def test_requests_are_recognised_by_their_prompts() -> None:
    observer = observer_request(CHAT)
    reflector = reflector_request("* 🔴 (10:00) x", 1)
    assert is_observer_request(observer) and not is_reflector_request(observer)
    assert is_reflector_request(reflector) and not is_observer_request(reflector)
    chat = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "hi"}]
    assert om_reply(chat) is None and not is_observer_request([{"role": "user", "content": "hi"}])


def test_compose_reply_answers_om_requests_without_prefix() -> None:
    reply = compose_reply(observer_request(CHAT))
    assert reply.text.startswith("<observations>\n") and "".join(reply.pieces) == reply.text.rstrip()
    assert not reply.fail and not reply.slow
    assert compose_reply(reflector_request("Date: Dec 4, 2025\n* 🔴 (10:00) x", 1)).text == (
        "<observations>\nDate: Dec 4, 2025\n* 🔴 (10:00) x\n</observations>")


def test_plain_chat_and_titles_unchanged() -> None:
    assert compose_reply([{"role": "user", "content": "hello"}]).text == (
        '[local model] You said: "hello". I can see 0 earlier messages in this conversation.')
    title = compose_reply([{"role": "system", "content": "Write a short title for a conversation."},
                           {"role": "user", "content": "What is the weather in Rome?"}])
    assert title.text == "What is the weather in Rome"
    assert compose_reply([{"role": "user", "content": "boom [[fail]]"}]).fail


async def collect(messages: list[dict[str, Any]]) -> str:
    return "".join([event.text async for event in stream_local(messages) if isinstance(event, TextDelta)])


@pytest.mark.anyio
async def test_observer_fail_trigger() -> None:
    failing = CHAT + [message("user", "2025-12-05T09:01:00.000Z", "now break [[observer-fail]]")]
    with pytest.raises(ModelProviderError) as raised:
        await collect(observer_request(failing))
    assert raised.value.kind == "connection"
    # A chat [[fail]] long observed is just text to the observer; so is an earlier [[observer-fail]].
    old_triggers = [message("user", "2025-12-04T08:00:00.000Z", "crash test [[fail]] [[observer-fail]]"), *CHAT]
    assert "<current-task>" in await collect(observer_request(old_triggers))


@pytest.mark.anyio
async def test_observer_degenerate_trigger() -> None:
    looping = CHAT + [message("user", "2025-12-05T09:01:00.000Z", "loop please [[observer-degenerate]]")]
    answer = await collect(observer_request(looping))
    assert len(answer) >= 5000
    parsed = parse_observer_output(answer)
    assert parsed.degenerate and parsed.observations == ""


@pytest.mark.anyio
async def test_through_the_client() -> None:
    client = LiteLLMClient(environ={})
    stream = client.stream(ModelRequest("google/gemini-2.5-flash", observer_request(CHAT)))
    text = "".join([event.text async for event in stream if isinstance(event, TextDelta)])
    assert parse_observer_output(text).observations == observe(CHAT).observations


def test_a_conversation_that_repeats_itself_is_observed_and_reflected_not_rejected() -> None:
    """A soak's conversations are one greeting and one answer, hundreds of times: the
    observer writes each statement once a day with its count (written out, every line
    would repeat and Mastra's degenerate check would reject the answer: the window would
    then grow without end), and the reflector merges what several cycles wrote, adding
    the counts; a log that says little many times may shrink to a line."""
    chat = [message("user" if i % 2 == 0 else "assistant", f"2025-12-04T14:{i // 60:02d}:{i % 60:02d}.000Z",
                    "hello" if i % 2 == 0 else 'You said: "hello". I can see earlier messages.')
            for i in range(80)]
    parsed = observe(chat)
    assert not parsed.degenerate and observer_problem(parsed.observations, parsed.degenerate) is None
    assert parsed.observations.split("\n") == ["Date: Dec 4, 2025", '* 🔴 (14:00) User stated: "hello" (40 times)',
                                               '* 🟢 (14:00) Assistant replied: "You said: "hello"." (40 times)']
    log = "\n".join([parsed.observations, *observe(chat[:20]).observations.split("\n")[1:]] * 3)
    reflected = parse_reflector_output(reflector_answer(reflector_request(log, 0)))
    assert reflected.observations.split("\n") == ["Date: Dec 4, 2025", '* 🔴 (14:00) User stated: "hello" (150 times)']
    text = reflected.observations
    assert reflection_problem(text, reflected.degenerate, tokens=estimate_tokens(text),
                              source_tokens=estimate_tokens(distinct_observations(log))) is None
    assert estimate_tokens(distinct_observations(log)) < estimate_tokens(log) / 10


def test_an_om_answer_streams_in_a_few_large_pieces() -> None:
    """The observer's and reflector's answers are read whole, never shown as they stream: a
    long one comes in pieces of MEMORY_PIECE_CHARS, not a word a piece."""
    from dev_server.llm.local_model import MEMORY_PIECE_CHARS

    log = "\n".join(f"* 🔴 (10:{i % 60:02d}) the user said thing number {i}" for i in range(400))
    reply = compose_reply(reflector_request(f"Date: Dec 4, 2025\n{log}", 1))
    assert "".join(reply.pieces) == reply.text.rstrip() and len(reply.text) > 4 * MEMORY_PIECE_CHARS
    assert len(reply.pieces) == -(-len(reply.text.rstrip()) // MEMORY_PIECE_CHARS)
