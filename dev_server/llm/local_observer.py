"""The built-in local model as Observational Memory's observer (and the door to its reflector), offline.

Without a provider key the observer and reflector calls of ``dev_server.om`` reach the local
model like any other request. ``dev_server.llm.local_model.compose_reply`` hands them here; they
are recognised by the first sentence of their system prompt (``OBSERVER_IDENTITY``,
``REFLECTOR_IDENTITY`` in ``dev_server.kernel.prompt_marks``), and the answer is the text itself, in the
format ``dev_server.om.prompting.parsing`` reads, so a whole observe-then-reflect cycle runs in tests.

The reflector's answers are ``dev_server.llm.local_reflector``'s; both write the observation-log
lines of ``dev_server.llm.local_om_text``.

Observer: it reads the transcript under ``## New Message History to Observe`` (the format
of ``dev_server.om.prompting.transcript``: date lines, ``User (2:30 PM): ...`` lines whose time carries
forward when omitted) and writes, under a ``Date: Dec 4, 2025`` line per date, one line per
statement:

* ``* 🔴 (14:30) User stated: "<text, cut to ~200 chars>"``; a question (ending in ``?``) is
  ``* 🟡 (14:30) User asked: "..."``; a message that opens by saying something worked or is
  settled ("That fixed it", "It works now", "Perfect") is a completion,
  ``* ✅ (14:30) User confirmed: "..."``;
* ``* 🟢 (14:31) Assistant replied: "<its first sentence>"``;
* ``* 🟡 (14:31) 3 days later — 03/05/2026, 9:00 AM UTC`` for a ``Signal:`` line (a temporal gap);
* ``* 🟡 (14:31) Called <tool>`` for each tool call.

A call writes at most ``OBSERVATION_TOKENS`` of observations, as a real observer's output
budget holds it to a few thousand tokens whatever it reads: over that, the newest lines of
every priority stay, then older 🔴 and ✅ ones (facts about the user first), and the rest is
counted in one ``* 🟡 (HH:MM) Earlier: N observations condensed`` line per thread
(``dev_server.llm.local_om_budget``). The transcript is read once, and only the lines that
may be kept are counted, so a call on a 5 M-token backlog takes seconds, not minutes.

Then, unless the prompt leaves them out, ``<current-task>`` (``Respond to: "<last user
text>"``), ``<suggested-response>`` (``Continue the conversation about "..."``) and, when
the prompt asks for it, ``<thread-title>`` (the first words of the first user message).
Transcripts of several threads (``<thread id="...">`` lines) get one ``<thread>`` block each,
holding that thread's hint and extractor sections (its prior values read from its own
``<thread id>`` block of the prior metadata); the sections the prompt calls shared are
written once, after ``</observations>``, from every thread's statements.

Extractors (``dev_server.om.options.extractors``): for every other ``<slug>`` section its system prompt
describes, the observer writes ``<slug>run N: "<last user text>"</slug>``, N being one more
than the N of the prior value it was shown (so a test sees that the previous extraction
reached the next run); for ``<working-memory>`` the prior document plus one ``- <text>`` line
per user statement, its oldest ``- `` lines left out beyond ``WORKING_MEMORY_TOKENS``. A
structured follow-up (``EXTRACTOR_IDENTITY``) is answered with a JSON
object built from its schema: strings are the last user statement of the source, numbers
the count of user statements, booleans true, arrays the statements, objects recursively.

Test triggers, in the last user message of the observed transcript:

* ``[[observer-fail]]`` -- the call fails as the local model's ``[[fail]]`` does
  (``om_reply(...).fail``), so a failed observation can be tested;
* ``[[observer-degenerate]]`` -- the answer repeats one 200-character line ~5,000 characters
  long, which ``detect_degenerate_repetition`` rejects;
* ``[[observer-prose]]`` -- the answer is an ``<observations>`` block holding prose, not
  observation lines; ``[[observer-refusal]]`` -- a refusal, with one refusing list line
  (both rejected by ``dev_server.om.engine.output_check``).

(The reflector's triggers are in ``dev_server.llm.local_reflector``.)

Deterministic, like the local model: the same messages always give the same answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dev_server.kernel.prompt_marks import (
    CURRENT_TASK_SECTION,
    EXTRACTOR_IDENTITY,
    HISTORY_HEADING,
    OBSERVER_IDENTITY,
    PRIOR_METADATA_HEADING,
    REFLECTOR_IDENTITY,
    SCHEMA_CLOSE,
    SCHEMA_OPEN,
    SHARED_SECTIONS_NOTE,
    SKIP_HINTS_NOTE,
    SOURCE_HEADING,
    SUGGESTED_RESPONSE_SECTION,
    TASK_HEADING,
    THREAD_TITLE_SECTION,
)
from dev_server.llm.local_om_budget import fitted, line_tokens
from dev_server.llm.local_om_text import (
    QUOTE_CHARS,
    degenerate_log,
    first_text,
    merged_repeats,
    system_text,
    user_text_under,
)
from dev_server.llm.local_reflector import reflector_answer

OBSERVER_FAIL_TRIGGER = "[[observer-fail]]"
OBSERVER_DEGENERATE_TRIGGER = "[[observer-degenerate]]"
OBSERVER_PROSE_TRIGGER = "[[observer-prose]]"
OBSERVER_REFUSAL_TRIGGER = "[[observer-refusal]]"
OBSERVER_PROSE = ("<observations>\nThe user and the assistant had a friendly conversation about the user's plans.\n"
                  "</observations>")
OBSERVER_REFUSAL = "I'm sorry, but I can't help with that.\n\n- I cannot record observations about this conversation."
_TOPIC_CHARS = 60
OBSERVATION_TOKENS = 3_000  # a call's observations at most: a real observer's output, not its input's size
WORKING_MEMORY_TOKENS = 600  # the working-memory section's items, newest kept
CONDENSED_MARK = "🟡"
_TITLE_WORDS = 6

_DATE_LINE = re.compile(r"^([A-Z][a-z]{2}) (\d{1,2}) (\d{4}):$")
_TIME_LABEL = r"(?: \((\d{1,2}):(\d{2}) ([AP]M)\))?"  # any line's title may carry one
_SPEAKER_LINE = re.compile(r"^(User|Assistant|System|Tool|Signal)" + _TIME_LABEL + r": ?(.*)$")
_TOOL_CALL_LINE = re.compile(r"^Tool Call ([^:(]+?)" + _TIME_LABEL + ":")
# A line of a tool call's argument outline (om/prompting/tool_arguments.py): a field's path and
# its value as JSON or a container's summary, or an indented preview. A field named ``User``
# must not read as a speaker.
_ARGUMENT_LINE = re.compile(r'^[\w$.\[\]]+: (?:".*"|-?\d[\d.eE+-]*|true|false|null|<object>|<array, \d+ items?>)$')
_IGNORED_LINE = re.compile(r"^(?:Reasoning|Tool (?:Result|Error|Denied) [^:(]+?)" + _TIME_LABEL + ":")
_THREAD_OPEN = re.compile(r'^<thread id="([^"]*)">$')
_TRIGGER = re.compile(r"\[\[[\w-]+\]\]")
_OBSERVER_TRIGGER = re.compile(r"\[\[(?!reflector-)[\w-]+\]\]")  # a reflector's stays in the log
_FIRST_SENTENCE = re.compile(r"^(.+?[.!?])(?:\s|$)", re.S)
# A user's message that opens by saying something worked or was settled is a ✅ completion.
_CONFIRMATION = re.compile(r"(?:that|this|it)\s+(?:fixed\s+it|worked|works|did\s+it|solved\s+it)\b"
                           r"|(?:it\s+)?works\s+now\b|perfect\b|problem\s+solved\b|all\s+good\b", re.I)


@dataclass(frozen=True)
class OmReply:
    """The local model's answer to an observer or reflector request."""

    text: str
    fail: bool = False


@dataclass
class _Statement:
    role: str  # "user", "assistant", "signal" (a temporal-gap reminder) or "tool"
    date: str
    time: str
    text: str


@dataclass
class _Thread:
    id: str | None
    statements: list[_Statement] = field(default_factory=list)


def om_reply(messages: Sequence[dict[str, Any]]) -> OmReply | None:
    """The answer when ``messages`` are an observer or reflector request, else None."""
    if is_extractor_request(messages):
        return OmReply(structured_answer(messages))
    if is_reflector_request(messages):
        return OmReply(reflector_answer(messages))
    if is_observer_request(messages):
        threads = _read_transcript(user_text_under(messages, HISTORY_HEADING))
        return OmReply(observer_answer(messages, threads), fail=OBSERVER_FAIL_TRIGGER in _last_user(threads))
    return None


def is_extractor_request(messages: Sequence[dict[str, Any]]) -> bool:
    return system_text(messages).startswith(EXTRACTOR_IDENTITY)


def is_observer_request(messages: Sequence[dict[str, Any]]) -> bool:
    return system_text(messages).startswith(OBSERVER_IDENTITY)


def is_reflector_request(messages: Sequence[dict[str, Any]]) -> bool:
    return system_text(messages).startswith(REFLECTOR_IDENTITY)


def observer_answer(messages: Sequence[dict[str, Any]], threads: list[_Thread] | None = None) -> str:
    """The observer's answer; ``threads``: the transcript already read."""
    if threads is None:
        threads = _read_transcript(user_text_under(messages, HISTORY_HEADING))
    last = _last_user(threads)
    if OBSERVER_DEGENERATE_TRIGGER in last:
        return degenerate_log()
    if OBSERVER_PROSE_TRIGGER in last:
        return OBSERVER_PROSE
    if OBSERVER_REFUSAL_TRIGGER in last:
        return OBSERVER_REFUSAL
    system = system_text(messages)
    skip_hints = any(SKIP_HINTS_NOTE in first_text(m.get("content")) for m in messages if m.get("role") == "user")
    sections = {"current-task": CURRENT_TASK_SECTION in system and not skip_hints,
                "suggested-response": SUGGESTED_RESPONSE_SECTION in system and not skip_hints,
                "thread-title": THREAD_TITLE_SECTION in system}
    task = next((first_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
    slugs = _extractor_slugs(system)
    if any(thread.id is not None for thread in threads):
        shared = _shared_slugs(system)
        own = [slug for slug in slugs if slug not in shared]
        priors = _prior_section(task)
        observed = _fitted_per_thread([_observation_lines(thread.statements) for thread in threads])
        lines = [line for thread, observations in zip(threads, observed, strict=True)
                 for line in [f'<thread id="{thread.id}">', *observations,
                              *_hint_sections(thread.statements, sections),
                              *_extractor_sections(own, _thread_priors(priors, thread.id), thread.statements),
                              "</thread>"]]
        everyone = [statement for thread in threads for statement in thread.statements]
        return "\n".join(["<observations>", *lines, "</observations>",
                          *_extractor_sections(shared, _THREAD_PRIORS.sub("", priors), everyone)])
    statements = [statement for thread in threads for statement in thread.statements]
    observations = fitted(_observation_lines(statements), OBSERVATION_TOKENS, mark=CONDENSED_MARK)
    return "\n".join(["<observations>", *observations, "</observations>",
                      *_hint_sections(statements, sections), *_extractor_sections(slugs, task, statements)])


_SECTION_OPEN = re.compile(r"^<([a-z0-9]+(?:-[a-z0-9]+)*)>$", re.M)
_BUILT_IN_SECTIONS = {"current-task", "suggested-response", "thread-title", "observations", "thread"}
_RUN = re.compile(r"^run (\d+):")
_SHARED_LINE = re.compile(re.escape(SHARED_SECTIONS_NOTE) + r"(.*)$", re.M)
_THREAD_PRIORS = re.compile(r'^<thread id="([^"]*)">\n([\s\S]*?)^</thread>\n?', re.M)


def _extractor_slugs(system: str) -> list[str]:
    """The extractor sections the observer's instructions describe."""
    return [slug for slug in dict.fromkeys(_SECTION_OPEN.findall(system))
            if slug not in _BUILT_IN_SECTIONS and f"</{slug}>" in system]


def _shared_slugs(system: str) -> list[str]:
    found = _SHARED_LINE.search(system)
    return re.findall(r"<([a-z0-9-]+)>", found.group(1)) if found else []


def _prior_section(task: str) -> str:
    """The task's prior values (several threads: a ``<thread id>`` block each, shared ones outside)."""
    start = task.find(PRIOR_METADATA_HEADING)
    return task[start:task.find(TASK_HEADING, start)] if start >= 0 else ""


def _thread_priors(priors: str, thread_id: str | None) -> str:
    return next((m.group(2) for m in _THREAD_PRIORS.finditer(priors) if m.group(1) == thread_id), "")


def _extractor_sections(slugs: Sequence[str], priors: str, statements: list[_Statement]) -> list[str]:
    """The sections of ``slugs``, each continuing its prior value found in ``priors``."""
    users = [_flat(_TRIGGER.sub(" ", s.text)) for s in statements if s.role == "user"]
    users = [text for text in users if text]
    if not users:
        return []
    sections = []
    for slug in slugs:
        prior = re.search(rf"<{slug}>([\s\S]*?)</{slug}>", priors)
        if slug == "working-memory":
            lines = prior.group(1).strip().split("\n") if prior else []
            value = "\n".join(_newest_items([*lines, *(f"- {text}" for text in users)], WORKING_MEMORY_TOKENS))
        else:
            runs = _RUN.match(prior.group(1).strip()) if prior else None
            value = f"run {int(runs.group(1)) + 1 if runs else 1}: {_quote(users[-1], _TOPIC_CHARS)}"
        sections.append(f"<{slug}>{value}</{slug}>")
    return sections


def _newest_items(lines: list[str], budget: int) -> list[str]:
    """``lines`` without their oldest ``- `` items beyond ``budget`` tokens (other lines stay)."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if line.startswith("- "):
            if used > budget:
                continue
            used += line_tokens(line)
            if used > budget:
                continue
        kept.append(line)
    return kept[::-1]


def structured_answer(messages: Sequence[dict[str, Any]]) -> str:
    """A JSON object fitting the schema of a structured extractor call."""
    system = system_text(messages)
    start, end = system.find(SCHEMA_OPEN), system.find(SCHEMA_CLOSE)
    schema = json.loads(system[start + len(SCHEMA_OPEN):end]) if 0 <= start < end else {}
    source = user_text_under(messages, SOURCE_HEADING)
    users = [_flat(m.group(1)) for m in re.finditer(r"^User(?: \([^)]*\))?: (.*)$", source, re.M)]
    users = [_TRIGGER.sub(" ", text).strip() for text in users if text.strip()] or ["nothing yet"]
    return json.dumps(_instance(schema, users))


def _instance(schema: dict[str, Any], users: list[str]) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {key: _instance(sub, users) for key, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [_instance(schema.get("items") or {"type": "string"}, [text]) for text in users]
    if kind == "integer" or kind == "number":
        return len(users)
    if kind == "boolean":
        return True
    return users[-1]


def _time_of(match: re.Match[str], group: int) -> str | None:
    """``HH:MM`` of a line's ``(h:mm AM)`` label (groups ``group`` to ``group + 2``), if it has one."""
    if not match.group(group):
        return None
    hour = int(match.group(group)) % 12 + (12 if match.group(group + 2) == "PM" else 0)
    return f"{hour:02d}:{match.group(group + 1)}"


def _read_transcript(transcript: str) -> list[_Thread]:
    threads = [_Thread(None)]
    date, time = "", "00:00"
    current: _Statement | None = None
    in_arguments = False  # on the lines after a tool call's title: its argument outline
    for line in transcript.split("\n"):
        stripped = line.strip()
        if in_arguments and (line[:1].isspace() or _ARGUMENT_LINE.match(line) or line.startswith("... [")):
            continue
        in_arguments = False
        if match := _THREAD_OPEN.match(stripped):
            threads.append(_Thread(match.group(1)))
            current = None
        elif stripped == "</thread>":
            threads.append(_Thread(None))
            current = None
        elif match := _DATE_LINE.match(stripped):
            date, current = f"{match.group(1)} {int(match.group(2))}, {match.group(3)}", None
        elif match := _TOOL_CALL_LINE.match(line):
            time = _time_of(match, 2) or time
            threads[-1].statements.append(_Statement("tool", date, time, match.group(1).strip()))
            current, in_arguments = None, True
        elif match := _IGNORED_LINE.match(line):
            time = _time_of(match, 1) or time
            current = None
        elif match := _SPEAKER_LINE.match(line):
            time = _time_of(match, 2) or time
            role = match.group(1).lower()
            current = _Statement(role, date, time, match.group(5)) if role in ("user", "assistant", "signal") \
                else None
            if current is not None:
                threads[-1].statements.append(current)
        elif current is not None:
            current.text += "\n" + line
    return [thread for thread in threads if thread.statements]


def _observation_lines(statements: list[_Statement]) -> list[str]:
    """One line per statement, dated; a statement said again the same day is written once,
    with its count (``merged_repeats``): a conversation of one greeting over and over is one
    observation, not a log that repeats itself and fails the degenerate check."""
    lines: list[str] = []
    date: str | None = None
    for statement in statements:
        line = _observation(statement)
        if line is None:
            continue
        if statement.date and statement.date != date:
            lines.append(f"Date: {statement.date}")
            date = statement.date
        lines.append(line)
    return merged_repeats(lines)


def _observation(statement: _Statement) -> str | None:
    text = _flat(_OBSERVER_TRIGGER.sub(" ", statement.text))
    if statement.role == "tool":
        return f"* 🟡 ({statement.time}) Called {statement.text}"
    if not text:
        return None
    if statement.role == "signal":
        return f"* 🟡 ({statement.time}) {text}"
    if statement.role == "user":
        if text.endswith("?"):
            return f"* 🟡 ({statement.time}) User asked: {_quote(text, QUOTE_CHARS)}"
        if _CONFIRMATION.match(text):
            return f"* ✅ ({statement.time}) User confirmed: {_quote(text, QUOTE_CHARS)}"
        return f"* 🔴 ({statement.time}) User stated: {_quote(text, QUOTE_CHARS)}"
    sentence = _FIRST_SENTENCE.match(text)
    first = sentence.group(1) if sentence else text
    return f"* 🟢 ({statement.time}) Assistant replied: {_quote(first, QUOTE_CHARS)}"


def _hint_sections(statements: list[_Statement], sections: dict[str, bool]) -> list[str]:
    users = [_flat(_TRIGGER.sub(" ", s.text)) for s in statements if s.role == "user"]
    users = [text for text in users if text]
    if not users:
        return []
    hints = []
    if sections["current-task"]:
        hints.append(f"<current-task>Respond to: {_quote(users[-1], QUOTE_CHARS)}</current-task>")
    if sections["suggested-response"]:
        hints.append(f"<suggested-response>Continue the conversation about {_quote(users[-1], _TOPIC_CHARS)}"
                     "</suggested-response>")
    if sections["thread-title"]:
        words = [w.strip("\"'`:") for w in users[0].replace(":", " ").split()][:_TITLE_WORDS]
        hints.append(f"<thread-title>{' '.join(w for w in words if w).rstrip('.,!?;')}</thread-title>")
    return hints


def _last_user(threads: list[_Thread]) -> str:
    return next((s.text for t in reversed(threads) for s in reversed(t.statements) if s.role == "user"), "")


def _fitted_per_thread(observations: list[list[str]]) -> list[list[str]]:
    """Each thread's observation lines, all of them within one call's budget together."""
    tagged = [line for lines in observations for line in ['<thread id="">', *lines, "</thread>"]]
    result: list[list[str]] = []
    for line in fitted(tagged, OBSERVATION_TOKENS, mark=CONDENSED_MARK):
        if line.startswith("<thread "):
            result.append([])
        elif line != "</thread>":
            result[-1].append(line)
    return result


def _flat(text: str) -> str:
    return " ".join(text.split())


def _quote(text: str, limit: int) -> str:
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return f'"{text}"'
