"""dev_server.om.prompting.prompts, dev_server.om.prompting.transcript, dev_server.om.prompting.parsing: what the
observer and reflector are told, how history is shown to the observer, and how their answers are read
(docs/observational-memory.md#prompts).

Pure functions, no model: transcripts are built from ``Message`` values in UTC.
"""

from __future__ import annotations

import json
from datetime import UTC
from typing import Any

import pytest

from dev_server.kernel.messages import Message
from dev_server.om.options.extractors import Extractor
from dev_server.om.prompting.parsing import (
    detect_degenerate_repetition,
    parse_observer_output,
    parse_reflector_output,
    sanitize_observation_lines,
)
from dev_server.om.prompting.prompts import (
    COMPRESSION_GUIDANCE,
    HISTORY_HEADING,
    OBSERVER_IDENTITY,
    PREVIOUS_OBSERVATIONS_HEADING,
    PRIOR_METADATA_HEADING,
    REFLECT_HEADING,
    REFLECTOR_IDENTITY,
    TASK_HEADING,
    observer_messages,
    observer_system_prompt,
    reflection_max_level,
    reflection_start_level,
    reflector_messages,
    reflector_system_prompt,
)
from dev_server.om.prompting.transcript import TOOL_OUTPUT_TOKEN_CAP, attachment_parts, format_transcript

PNG = "data:image/png;base64,iVBORw0KGgo="
PDF = "data:application/pdf;base64,JVBERi0x"


def message(role: str, created_at: str, *parts: dict[str, Any], text: str | None = None) -> Message:
    all_parts = [{"type": "text", "text": text}] if text is not None else list(parts)
    return Message(id=f"m-{created_at}-{role}", thread_id="t", resource_id="r", role=role,
                   content={"format": 2, "parts": all_parts, "content": text or ""}, created_at=created_at)


def tool(state: str, call_id: str, name: str, args: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool-invocation",
            "toolInvocation": {"state": state, "toolCallId": call_id, "toolName": name, "args": args, **extra}}


def transcript(*messages: Message) -> str:
    return format_transcript(list(messages), tz=UTC)[0]


# --- prompts ---------------------------------------------------------------------------------

def test_observer_prompt_has_every_section_in_order() -> None:
    prompt = observer_system_prompt()
    assert prompt.startswith(OBSERVER_IDENTITY)
    positions = [prompt.index(marker) for marker in (
        "ONLY", "1. ASSERTIONS", "10. TRACK COMPLETION", "=== OUTPUT FORMAT ===",
        "<observations>\nDate: Dec 4, 2025\n* 🔴 (14:30)",
        "<current-task>", "<suggested-response>", "=== GUIDELINES ===", "=== IMPORTANT: THREAD ATTRIBUTION ===",
        "User messages are extremely important.")]
    assert positions == sorted(positions)
    for emoji in ("🔴", "🟡", "🟢", "✅"):
        assert emoji in prompt
    assert "<thread-title>" not in prompt and "=== CUSTOM INSTRUCTIONS ===" not in prompt
    assert "=== MULTI-THREAD INPUT ===" not in prompt


def test_observer_prompt_options() -> None:
    bare = observer_system_prompt(current_task=False, suggested_response=False)
    assert "<current-task>" not in bare and "<suggested-response>" not in bare
    assert observer_system_prompt(thread_title=True).count("<thread-title>") == 1
    multi = observer_system_prompt(multi_thread=True)
    assert "=== MULTI-THREAD INPUT ===" in multi and '<thread id="' in multi
    assert "=== IMPORTANT: THREAD ATTRIBUTION ===" not in multi
    custom = observer_system_prompt(instruction="Track the user's pets.")
    assert custom.endswith("=== CUSTOM INSTRUCTIONS ===\n\nTrack the user's pets.")


def test_observer_messages_task_then_history() -> None:
    task, history = observer_messages("User (2:30 PM): hi", previous_observations="* 🔴 (14:00) old",
                                      prior_current_task="Plan the trip", prior_suggested_response="Ask for dates",
                                      prior_thread_title="Trip")
    assert task["role"] == history["role"] == "user"
    assert history["content"] == f"{HISTORY_HEADING}\n\nUser (2:30 PM): hi"
    text = task["content"]
    assert text.startswith(f"{PREVIOUS_OBSERVATIONS_HEADING}\n\n* 🔴 (14:00) old\n\n---\n\n")
    # the prior hints as lines, then echoed as sections, as Mastra's task shows them
    assert (f"{PRIOR_METADATA_HEADING}\n\n- prior current-task: Plan the trip\n"
            "- prior suggested-response: Ask for dates\n- prior thread-title: Trip\n"
            "<current-task>\nPlan the trip\n</current-task>\n<suggested-response>\nAsk for dates\n"
            "</suggested-response>\n<thread-title>\nTrip\n</thread-title>\n\nTreat the prior current-task, "
            "suggested-response and thread-title as hints for continuity") in text
    assert text.index(PRIOR_METADATA_HEADING) < text.index(TASK_HEADING)
    assert "Output <observations> every time." not in text and "<thread id=" not in text


def test_observer_messages_echo_extractor_values_and_drop_hints_of_a_background_call() -> None:
    task, _ = observer_messages("x", previous_observations=None, prior_current_task="t",
                                prior_suggested_response="s", skip_continuation_hints=True,
                                prior_extracted=[("topics", " run 1: tea ")])
    text = task["content"]
    assert text.startswith(f"{PRIOR_METADATA_HEADING}\n\n<topics>\nrun 1: tea\n</topics>\n\n"
                           "Treat the prior topics as hints")
    assert "current-task" not in text.split(TASK_HEADING)[0] and "- prior" not in text


def test_observer_messages_for_several_threads() -> None:
    task, history = observer_messages('<thread id="a">\nUser: hi\n</thread>', previous_observations=None,
                                      prior_current_task=None, prior_suggested_response=None,
                                      thread_priors={"a": [("current-task", "Trip")], "b": []})
    assert history["content"] == (f"{HISTORY_HEADING}\n\nThe messages below come from 2 conversation threads, "
                                  'each wrapped in a <thread id="..."> tag.\n\n<thread id="a">\nUser: hi\n</thread>')
    text = task["content"]
    assert ('<thread id="a">\n- prior current-task: Trip\n<current-task>\nTrip\n</current-task>\n</thread>\n\n'
            "Treat the prior current-task as hints for continuity, each thread's from its own <thread id> "
            "block") in text
    rule = text.split(f"{TASK_HEADING}\n\n", 1)[1]
    assert rule.startswith("Extract new observations from each thread")
    assert "one\n<thread id=\"...\"> block per thread" in rule
    assert rule.endswith("</thread>\n</observations>") and rule.count("<thread id=") == 3
    [one] = [m["content"] for m in observer_messages("t", previous_observations=None, prior_current_task=None,
                                                     prior_suggested_response=None, thread_priors={"a": []})[1:]]
    assert "come from 1 conversation thread, each" in one


def test_observer_messages_first_call_and_skipped_hints() -> None:
    task, _ = observer_messages("x", previous_observations=None, prior_current_task="t",
                                prior_suggested_response="s", skip_continuation_hints=True)
    assert task["content"].startswith(TASK_HEADING)  # no previous observations, no hints to continue
    assert task["content"].endswith("Output <observations> every time.")


def test_observer_messages_with_attachments() -> None:
    parts = [{"type": "image_url", "image_url": {"url": PNG}}]
    _, history = observer_messages("User: [Image #1: cat.png]", previous_observations=None, prior_current_task=None,
                                   prior_suggested_response=None, attachments=parts)
    assert history["content"] == [{"type": "text", "text": f"{HISTORY_HEADING}\n\nUser: [Image #1: cat.png]"}, *parts]


def test_observer_messages_take_transcript_attachments() -> None:
    _, attachments = format_transcript([message(
        "user", "2025-12-04T14:30:00.000Z", {"type": "file", "mimeType": "image/png", "data": PNG},
        {"type": "file", "mimeType": "text/plain", "data": "data:text/plain;base64,aGk="})], tz=UTC)
    _, history = observer_messages("t", previous_observations=None, prior_current_task=None,
                                   prior_suggested_response=None, attachments=attachments)
    assert history["content"][1:] == [{"type": "image_url", "image_url": {"url": PNG}}]  # text/plain not observed
    _, plain = observer_messages("t", previous_observations=None, prior_current_task=None,
                                 prior_suggested_response=None, attachments=attachments[1:])
    assert plain["content"] == f"{HISTORY_HEADING}\n\nt"


def test_reflector_prompt() -> None:
    prompt = reflector_system_prompt()
    assert prompt.startswith(REFLECTOR_IDENTITY) and OBSERVER_IDENTITY not in prompt
    assert "<observational-memory-instruction>" in prompt and "10. TRACK COMPLETION" in prompt
    assert "THE ENTIRE memory" in prompt and "USER ASSERTIONS COME BEFORE QUESTIONS" in prompt
    assert "=== THREAD ATTRIBUTION (RESOURCE SCOPE) ===" in prompt  # in every reflector prompt, as in Mastra's
    positions = [prompt.index(marker) for marker in (
        "<observational-memory-instruction>", "</observational-memory-instruction>", "observation reflector",
        "When you consolidate", "=== THREAD ATTRIBUTION", "=== OUTPUT FORMAT ===\n\nAnswer with the same format",
        "<current-task>\n", "<suggested-response>\n", "User messages are extremely important.")]
    assert positions == sorted(positions)
    # the output format is repeated in full after the quoted instructions
    assert prompt.count("<observations>\nDate: Dec 4, 2025\n* 🔴 (14:30)") == 2
    assert reflector_system_prompt(instruction="Be brief.").endswith("=== CUSTOM INSTRUCTIONS ===\n\nBe brief.")


@pytest.mark.parametrize("level, heading, detail", [
    (1, "## COMPRESSION REQUIRED", "8/10"), (2, "## AGGRESSIVE COMPRESSION REQUIRED", "6/10"),
    (3, "## CRITICAL COMPRESSION REQUIRED", "4/10"), (4, "## EXTREME COMPRESSION REQUIRED", "2/10")])
def test_compression_levels(level: int, heading: str, detail: str) -> None:
    [prompt] = reflector_messages("* 🔴 (10:00) x", level=level)
    assert prompt["role"] == "user"
    assert f"\n\n{heading}\n\n" in prompt["content"] and detail in prompt["content"]
    assert COMPRESSION_GUIDANCE[level].startswith(heading)
    assert "✅ completion markers" in COMPRESSION_GUIDANCE[level]  # every level keeps what is done
    assert "50-70%" in COMPRESSION_GUIDANCE[3] and "two or three date groups per day" in COMPRESSION_GUIDANCE[4]
    assert "one file or module" in COMPRESSION_GUIDANCE[2]


def test_reflector_messages_list_the_output_sections_every_time_and_carry_values_forward() -> None:
    [plain] = reflector_messages("* 🔴 (10:00) x", level=0)
    sections = plain["content"].split("## Additional Output Sections\n\n", 1)[1]
    assert "<current-task>\n" in sections and "<suggested-response>\n" in sections
    topics = Extractor(name="topics", instructions="What the user talks about.")
    [prompt] = reflector_messages("* 🔴 (10:00) x", level=1, prior_extracted=[("topics", "tea")],
                                  extractors=[topics], skip_continuation_hints=True)
    text = prompt["content"]
    assert "## Prior Extracted Values\n\n<topics>\ntea\n</topics>\n\nThese values were carried forward" in text
    sections = text.split("## Additional Output Sections\n\n", 1)[1]
    assert "<topics>\nWhat the user talks about.\n</topics>" in sections and "<current-task>\n" not in sections
    assert text.index("## COMPRESSION REQUIRED") < text.index("## Prior Extracted Values")


def test_reflector_messages_strip_groups_and_add_guidance() -> None:
    observations = ('<observation-group id="abc" range="m1:m2">\nDate: Dec 4, 2025\n* 🔴 (10:00) x\n'
                    "</observation-group>")
    [prompt] = reflector_messages(observations, level=0, guidance="Keep the pets.", skip_continuation_hints=True)
    text = prompt["content"]
    assert text.startswith(f"{REFLECT_HEADING}\n\nDate: Dec 4, 2025\n* 🔴 (10:00) x\n\n---\n\n")
    assert "observation-group" not in text and "COMPRESSION" not in text
    assert "## SPECIFIC GUIDANCE\n\nKeep the pets." in text and text.endswith("Output <observations> every time.")
    with pytest.raises(ValueError):
        reflector_messages("x", level=5)


def test_reflection_levels() -> None:
    assert reflection_start_level("google/gemini-2.5-flash") == 2
    assert reflection_start_level("openai/gpt-4o") == 1
    assert reflection_max_level(1) == 4 and reflection_max_level(2) == 4


# --- transcript ------------------------------------------------------------------------------

def test_transcript_dates_times_and_roles() -> None:
    text = transcript(
        message("user", "2025-12-04T14:30:00.000Z", text="Hello, I have two kids"),
        message("assistant", "2025-12-04T14:30:20.000Z", text="Nice to meet you!"),
        message("user", "2025-12-04T14:31:00.000Z", text="Thanks"),
        message("assistant", "2025-12-05T09:05:00.000Z", text="Good morning"),
        message("user", "2025-12-05T00:00:00.000Z", text="Midnight"))
    assert text == ("Dec 4 2025:\nUser (2:30 PM): Hello, I have two kids\nAssistant: Nice to meet you!\n"
                    "User (2:31 PM): Thanks\nDec 5 2025:\nAssistant (9:05 AM): Good morning\nUser (12:00 AM): Midnight")


def test_transcript_same_clock_time_on_a_new_day_is_written() -> None:
    text = transcript(message("user", "2025-12-04T14:30:00.000Z", text="a"),
                      message("user", "2025-12-05T14:30:00.000Z", text="b"))
    assert text == "Dec 4 2025:\nUser (2:30 PM): a\nDec 5 2025:\nUser (2:30 PM): b"


def test_transcript_local_time_zone() -> None:
    from zoneinfo import ZoneInfo

    text, _ = format_transcript([message("user", "2025-12-04T23:30:00.000Z", text="late")],
                                tz=ZoneInfo("Europe/Berlin"))
    assert text == "Dec 5 2025:\nUser (12:30 AM): late"


def test_transcript_tool_exchange_once_and_skipped_parts() -> None:
    text = transcript(
        message("assistant", "2025-12-04T14:31:00.000Z",
                {"type": "step-start"},
                {"type": "reasoning", "reasoning": "Search first.", "details": []},
                tool("call", "c1", "search", {"q": "acme"}),
                {"type": "data-om-status", "data": {"x": 1}}),
        message("assistant", "2025-12-04T14:31:00.000Z",
                tool("result", "c1", "search", {"q": "acme"}, result={"hits": 3}),
                tool("result", "c1", "search", {"q": "acme"}, result={"hits": 3}),
                tool("result", "c2", "fetch", {}, result="boom", isError=True),
                {"type": "text", "text": "Found 3."}))
    # every kind of line takes the time label when the time changes, as Mastra's transcript does
    assert text == ('Dec 4 2025:\nReasoning (2:31 PM): Search first.\nTool Call search: q: "acme"\n'
                    'Tool Result search: {\n  "hits": 3\n}\nTool Call fetch: arguments: [empty object]\n'
                    'Tool Error fetch: boom\n'
                    "Assistant: Found 3.")


def test_transcript_tool_lines_carry_the_time_when_it_changes() -> None:
    text = transcript(
        message("user", "2025-12-04T14:30:00.000Z", text="Weather in Leeds?"),
        message("assistant", "2025-12-04T14:31:00.000Z",
                tool("result", "c1", "weather", {"place": "Leeds"}, result="rain"), {"type": "step-start"}),
        message("assistant", "2025-12-04T14:32:00.000Z", {"type": "text", "text": "Rain."}))
    assert text == ('Dec 4 2025:\nUser (2:30 PM): Weather in Leeds?\nTool Call weather (2:31 PM): place: "Leeds"\n'
                    "Tool Result weather: rain\nAssistant (2:32 PM): Rain.")


def test_transcript_model_output_and_redaction() -> None:
    secret = "x" * 300
    part = tool("result", "c1", "web", {"url": "u"}, result={"ignored": True})
    model_output = {"encryptedContent": secret, "short": {"encryptedContent": "ok"}}
    part["providerMetadata"] = {"mastra": {"modelOutput": model_output}}
    text = transcript(message("assistant", "2025-12-04T14:31:00.000Z", part))
    output = json.loads(text.split("Tool Result web: ", 1)[1])
    assert output == {"encryptedContent": "[encrypted content redacted, 300 chars]",
                      "short": {"encryptedContent": "ok"}}


def test_transcript_truncates_large_tool_output() -> None:
    big = {"rows": [f"row {i:05d} with some padding text" for i in range(3000)]}
    text = transcript(message("assistant", "2025-12-04T14:31:00.000Z", tool("result", "c1", "query", {}, result=big)))
    result = text.split("Tool Result query: ", 1)[1]
    body, marker = result.rsplit("\n... [truncated ~", 1)
    assert marker.endswith(" tokens]") and int(marker[:-len(" tokens]")]) > 0
    assert len(body) <= TOOL_OUTPUT_TOKEN_CAP * 4


def test_transcript_attachments_numbered_per_kind() -> None:
    text, attachments = format_transcript([
        message("user", "2025-12-04T14:30:00.000Z",
                {"type": "text", "text": "Look"},
                {"type": "file", "mimeType": "image/png", "data": PNG, "filename": "cat.png"},
                {"type": "file", "mimeType": "application/pdf", "data": PDF},
                {"type": "file", "mimeType": "image/jpeg", "data": "https://example.com/dog.jpg"},
                {"type": "file", "mimeType": "text/csv", "data": "https://example.com/a.csv", "filename": "a.csv"})],
        tz=UTC)
    # as Mastra writes them: the line is named after the part's type, the label is the file
    # name, else a URL's last segment, else the media type
    assert text.split("\n")[1:] == ["User (2:30 PM): Look", "File: [Image #1: cat.png]",
                                    "File: [File #1: application/pdf]", "File: [Image #2: dog.jpg]",
                                    "File: [File #2: a.csv]"]
    assert [a.placeholder for a in attachments] == ["[Image #1: cat.png]", "[File #1: application/pdf]",
                                                    "[Image #2: dog.jpg]", "[File #2: a.csv]"]
    unnamed, _ = format_transcript([message("user", "2025-12-04T14:30:00.000Z", {"type": "image", "image": PNG})],
                                   tz=UTC)
    assert unnamed.split("\n")[1:] == ["Image (2:30 PM): [Image #1]"]
    assert attachment_parts(attachments) == [
        {"type": "image_url", "image_url": {"url": PNG}},
        {"type": "file", "file": {"file_data": PDF}},
        {"type": "image_url", "image_url": {"url": "https://example.com/dog.jpg"}}]


def test_transcript_flat_content_fallback() -> None:
    flat = Message(id="m", thread_id="t", resource_id="r", role="user",
                   content={"format": 2, "parts": [], "content": "only flat"}, created_at="2025-12-04T14:30:00.000Z")
    assert transcript(flat) == "Dec 4 2025:\nUser (2:30 PM): only flat"


# --- parsing ---------------------------------------------------------------------------------

def test_parse_observer_output_sections() -> None:
    raw = ("Some preamble\n<observations>\nDate: Dec 4, 2025\n* 🔴 (14:30) User has two kids\n</observations>\n"
           "  <OBSERVATIONS>\n* 🟡 (14:35) Second block\n  </OBSERVATIONS>\n"
           "<current-task>first</current-task>\n<current-task>\nsecond\n</current-task>\n"
           "<suggested-response>Say hi</suggested-response>\n<thread-title>Kids</thread-title>")
    parsed = parse_observer_output(raw)
    assert parsed.observations == "Date: Dec 4, 2025\n* 🔴 (14:30) User has two kids\n* 🟡 (14:35) Second block"
    assert (parsed.current_task, parsed.suggested_response, parsed.thread_title) == ("second", "Say hi", "Kids")
    assert not parsed.degenerate and parsed.raw == raw


def test_parse_observer_output_tags_must_start_a_line() -> None:
    parsed = parse_observer_output("text <observations>\n* 🔴 (1:00) inline\n</observations>\n- fallback line")
    assert parsed.observations == "* 🔴 (1:00) inline\n- fallback line"


def test_parse_observer_output_list_fallback_and_extracted_values() -> None:
    raw = ("Here you go:\n* 🔴 (14:30) User likes tea\nnot a list line\n  - nested item\n3. numbered\n"
           '<extracted-values>{"current-task": "From JSON"}</extracted-values>\n<current-task>From tag</current-task>')
    parsed = parse_observer_output(raw)
    assert parsed.observations == "* 🔴 (14:30) User likes tea\n  - nested item\n3. numbered"
    assert parsed.current_task == "From JSON" and parsed.suggested_response is None


def test_sanitize_long_lines() -> None:
    long_line = "* 🔴 (1:00) " + "".join(str(i) for i in range(6000))  # long, but not repetitive
    parsed = parse_observer_output(f"<observations>\n{long_line}\nshort\n</observations>")
    first, second = parsed.observations.split("\n")
    assert first == long_line[:10_000] + " … [truncated]" and second == "short"
    assert sanitize_observation_lines("ok\nfine") == "ok\nfine"


def test_degenerate_repeated_windows() -> None:
    text = "the same phrase " * 200  # period 16 divides the sampling step: windows repeat
    assert detect_degenerate_repetition(text)
    assert parse_observer_output(text).degenerate and parse_observer_output(text).observations == ""


def test_degenerate_giant_line() -> None:
    text = "".join(chr(0x4E00 + i % 20000) for i in range(60_000))
    assert detect_degenerate_repetition(text)
    assert not detect_degenerate_repetition(text[:49_000])


def test_degenerate_duplicate_lines() -> None:
    line = "* 🔴 (14:30) User stated the very same thing once more "
    varied = [f"* 🟡 (14:{i:02d}) Distinct observation number {i} about topic {i * 7}" for i in range(40)]
    mostly_same = "\n".join(varied[:8] + [line] * 40)
    assert not _windows_repeat(mostly_same)
    assert detect_degenerate_repetition(mostly_same)
    some_same = "\n".join(varied + [line] * 20)
    assert len(some_same) >= 2000 and not _windows_repeat(some_same)
    assert not detect_degenerate_repetition(some_same)  # 19 duplicates of 60 lines
    assert not detect_degenerate_repetition("\n".join([line] * 19 + ["x"]))  # fewer than 20 long lines


def test_not_degenerate() -> None:
    short = "again " * 300
    assert len(short) < 2000 and not detect_degenerate_repetition(short)
    lines = [f"* 🔴 (10:{i % 60:02d}) User mentioned fact number {i}: {i * 31 % 97} apples" for i in range(200)]
    assert not detect_degenerate_repetition("\n".join(lines))


def test_parse_reflector_output() -> None:
    raw = ("<observations>\nDate: Dec 4, 2025\n* 🔴 (14:30) [O12] User has two kids\n* [O3-N2] 🟡 (14:31) x\n"
           "</observations>\n<current-task>ignored</current-task>\n<suggested-response>Ask</suggested-response>")
    parsed = parse_reflector_output(raw)
    assert parsed.observations == "Date: Dec 4, 2025\n* 🔴 (14:30) User has two kids\n* 🟡 (14:31) x"
    assert parsed.suggested_response == "Ask" and not parsed.degenerate
    assert parse_reflector_output("Just a paragraph [O1] of memory.").observations == "Just a paragraph of memory."
    assert parse_reflector_output("intro\n- item\n<current-task>x</current-task>").observations == "- item"
    assert parse_reflector_output("the same phrase " * 200) == parse_reflector_output("the same phrase " * 200)
    assert parse_reflector_output("the same phrase " * 200).degenerate


def _windows_repeat(text: str) -> bool:
    step = max(1, len(text) // 50)
    windows = [text[i:i + 200] for i in range(0, len(text) - 199, step)]
    return len(windows) > 5 and (len(windows) - len(set(windows))) / len(windows) > 0.4
