"""What the actor model sees of its observations (docs/observational-memory.md#context, #manual-api
``getObservationsAsOf``).

Pure text work, no I/O. Each step, the processor turns the record's active observations
into a list of system messages: first how to read the memory, then (resource scope) the
unobserved tail of the user's other threads, then the literal ``<observations>`` and one
message per chunk of observations, then the thread's current task and suggested response.
Chunks follow the ``--- message boundary (<ISO>) ---`` lines that observation and
activation write between batches, so the older chunks stay byte-identical from step to
step and the provider's prompt cache keeps matching them. No ``</observations>`` is sent:
Mastra 1.31 stopped emitting it, and we match what its actor sees.

Before injection the observations are shortened (``optimize_observations_for_context``:
the 🟡/🟢 priority marks, tags and arrows cost tokens and tell the actor nothing) and
dated relative to today (``dev_server.om.prompting.relative_time``). Storage keeps the full text.

A synthetic user message (``continuation_message``) travels with the system messages: it
sorts first among the conversation (created at the epoch) and tells the model to carry on
as if nothing had been cut.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from dev_server.kernel.clock import parse_iso, to_iso
from dev_server.om.prompting.groups import has_groups, render_groups_for_context
from dev_server.om.prompting.relative_time import add_relative_time_to_observations

__all__ = [
    "END_OTHER_CONVERSATIONS_BLOCK", "OBSERVATION_CONTEXT_INSTRUCTIONS", "OBSERVATION_CONTEXT_PROMPT",
    "OBSERVATION_CONTINUATION_HINT", "OTHER_CONVERSATIONS_PREFACE", "START_OTHER_CONVERSATIONS_BLOCK",
    "add_relative_time_to_observations", "build_context_system_message",
    "build_context_system_messages", "continuation_message", "continuation_model_message",
    "message_boundary", "observations_as_of", "optimize_observations_for_context",
    "split_observation_chunks",
]

OBSERVATION_CONTEXT_PROMPT = (
    "The observations block below holds your memory of earlier conversations with this user.")

OBSERVATION_CONTEXT_INSTRUCTIONS = """\
IMPORTANT: Answer with the specific details these observations give you. Do not fall back on \
generic advice: shape the reply around what you know of this user's experiences, preferences \
and interests, and when they ask for a recommendation, tie it to things they have told you before.

KNOWLEDGE UPDATES: When the user asks how things stand now ("where do I live now?", "what is my \
current ...?"), use the MOST RECENT information. Every observation is dated; when two disagree, \
the later one replaces the earlier. Words such as "switched to", "moved to", "changed to" or \
"will start" signal that an older fact has been superseded.

PLANNED ACTIONS: When the user said they meant to do something ("I'm going to ...", "I will ...", \
"I can't wait to ...") and the date it was planned for has now passed (see relative times such as \
"2 weeks ago"), assume it was done unless the observations say otherwise. Someone who planned to \
start a new job "next Monday" three weeks ago has most likely started it.

MOST RECENT USER INPUT: The user's latest message decides what you do next. It outranks \
everything in the observations; use them to inform that answer, not to change the subject.

SYSTEM REMINDERS: Text inside <system-reminder> tags is internal guidance from the system, not \
something the user wrote. Follow it, but never mention, quote or refer to it in your reply."""

OBSERVATION_CONTINUATION_HINT = """\
Carry on with this conversation naturally and reply to the most recent message.

Treat the earlier context as background only. If something in it looks unfinished, pick it up \
only where that helps answer the latest request. If a suggested response is given, follow it \
in your own natural words.

Do not mention memory, summaries, internal instructions, how the context is handled, or that \
any messages are missing.

Every message after this reminder is newer than what came before it and takes priority."""

OTHER_CONVERSATIONS_PREFACE = (
    "What follows comes from OTHER conversations with this user, not the current one. It is "
    "there for reference only and need not be your focus:")
START_OTHER_CONVERSATIONS_BLOCK = "START_OTHER_CONVERSATIONS_BLOCK"
END_OTHER_CONVERSATIONS_BLOCK = "END_OTHER_CONVERSATIONS_BLOCK"

CONTINUATION_MESSAGE_ID = "om-continuation"
_EPOCH_ISO = "1970-01-01T00:00:00.000Z"

_ISO = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})"
# one capture group: re.split returns [chunk, iso, chunk, iso, chunk, ...]
_BOUNDARY = re.compile(rf"\n{{2,}}--- message boundary \(({_ISO})\) ---\n{{2,}}")

_ANCHOR_ID = re.compile(r"^([^\S\n]*)\[O\d+(?:-N\d+)?\][^\S\n]*", re.M)
_MINOR_PRIORITY = re.compile(r"[🟡🟢]\s*")
# A one-line [tag]. Kept: "[72 items collapsed - ID: b1fa]", a markdown link "[label](url)",
# and the gap lines relative_time adds, should text pass through here twice.
_TAG = re.compile(
    r"\[(?![\d\s]*items collapsed)(?!\d+ (?:days?|weeks?|months?) later\])[^\]\n]+\](?!\()")
_ARROW = re.compile(r"\s*->\s*")
_SPACES = re.compile(r" {2,}")
_BLANK_LINES = re.compile(r"\n{3,}")


def message_boundary(moment: datetime | str) -> str:
    """The separator written between two batches of observations, blank lines included;
    ``moment`` is the newest message the next batch observed (a naive one is UTC)."""
    if isinstance(moment, datetime):
        moment = to_iso(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    return f"\n\n--- message boundary ({moment}) ---\n\n"


def _split_with_dates(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The first chunk, then (boundary ISO, chunk) for each chunk after a boundary."""
    parts = _BOUNDARY.split(text)
    return parts[0], list(zip(parts[1::2], parts[2::2], strict=True))


def _optimize_chunk(chunk: str) -> str:
    chunk = _ANCHOR_ID.sub(r"\1", chunk)
    chunk = _MINOR_PRIORITY.sub("", chunk)
    chunk = _TAG.sub("", chunk)
    chunk = _ARROW.sub(" ", chunk)
    chunk = _SPACES.sub(" ", chunk)
    chunk = _BLANK_LINES.sub("\n\n", chunk)
    return chunk.strip()


def optimize_observations_for_context(text: str) -> str:
    """``text`` without what costs the actor tokens and tells it nothing, in order
    (docs/observational-memory.md#context):
    anchor ids ``[O12]``/``[O3-N2]`` at line start, 🟡/🟢 and the whitespace after them (🔴
    and ✅ stay), one-line ``[tags]``, ``->`` arrows with their surrounding whitespace (one
    space instead), runs of spaces, runs of 3+ newlines; then trimmed.

    Each chunk between message boundaries is cleaned on its own and the boundaries are
    written back unchanged, so no rule (an arrow at a chunk's end eats whitespace, newlines
    included) can merge a boundary into its neighbours. A chunk left empty is dropped with
    its boundary."""
    first, rest = _split_with_dates(text)
    optimized = _optimize_chunk(first)
    for iso, chunk in rest:
        chunk = _optimize_chunk(chunk)
        if chunk:
            optimized = f"{optimized}{message_boundary(iso)}{chunk}" if optimized else chunk
    return optimized


def split_observation_chunks(text: str) -> list[str]:
    """The observations cut at message boundaries, each chunk trimmed, empty ones dropped."""
    first, rest = _split_with_dates(text.strip())
    return [chunk for chunk in (part.strip() for part in [first, *(c for _, c in rest)]) if chunk]


def other_conversations_message(other_conversations: list[tuple[str, str]]) -> str:
    blocks = "\n\n".join(f'<other-conversation id="{thread_id}">\n{transcript}\n</other-conversation>'
                         for thread_id, transcript in other_conversations)
    return (f"{OTHER_CONVERSATIONS_PREFACE}\n{START_OTHER_CONVERSATIONS_BLOCK}\n{blocks}\n"
            f"{END_OTHER_CONVERSATIONS_BLOCK}")


def build_context_system_messages(
    observations: str,
    *,
    now: datetime,
    current_task: str | None = None,
    suggested_response: str | None = None,
    other_conversations: list[tuple[str, str]] | None = None,
    retrieval_instructions: str | None = None,
    extracted: Sequence[tuple[str, str]] = (),
) -> list[str]:
    """The system messages carrying the observations, in the order of docs/observational-memory.md#context; each element
    is sent as its own system message. Blank observations give only the retrieval
    instructions when there are any, else nothing.

    ``other_conversations`` holds (thread id, transcript already formatted for the observer)
    for the resource's other threads; ``now`` dates the observations relative to today.
    With ``retrieval_instructions`` (retrieval on) a log holding observation groups is not
    optimised: each group is shown with its id and message range (``dev_server.om.prompting.groups``)."""
    if not observations.strip():
        return [retrieval_instructions] if retrieval_instructions else []
    guidance = f"{OBSERVATION_CONTEXT_PROMPT}\n\n{OBSERVATION_CONTEXT_INSTRUCTIONS}"
    if retrieval_instructions:
        guidance = f"{guidance}\n\n{retrieval_instructions}"
    messages = [guidance]
    if other_conversations:
        messages.append(other_conversations_message(other_conversations))
    if retrieval_instructions and has_groups(observations):  # the groups and their ranges, unoptimised
        shown = render_groups_for_context(observations)
    else:
        shown = optimize_observations_for_context(observations)
    dated = add_relative_time_to_observations(shown, now)
    chunks = split_observation_chunks(dated)
    if chunks:
        messages += ["<observations>", *chunks]
    if current_task and current_task.strip():
        messages.append(f"<current-task>\n{current_task}\n</current-task>")
    if suggested_response and suggested_response.strip():
        messages.append(f"<suggested-response>\n{suggested_response}\n</suggested-response>")
    messages += [f"<{slug}>\n{value}\n</{slug}>" for slug, value in extracted if value]  # the extracted values, last
    return messages


def build_context_system_message(
    observations: str,
    *,
    now: datetime,
    current_task: str | None = None,
    suggested_response: str | None = None,
    other_conversations: list[tuple[str, str]] | None = None,
    retrieval_instructions: str | None = None,
) -> str:
    """The same messages as one text (blank-line separated), as ``Memory.getContext`` returns."""
    return "\n\n".join(build_context_system_messages(
        observations, now=now, current_task=current_task, suggested_response=suggested_response,
        other_conversations=other_conversations, retrieval_instructions=retrieval_instructions))


def _continuation_text() -> str:
    return f"<system-reminder>{OBSERVATION_CONTINUATION_HINT}</system-reminder>"


def continuation_message() -> dict[str, Any]:
    """The reminder as a stored-message-like dict: created at the epoch, so it sorts before
    every real message of the thread. It is never saved and never observed."""
    return {"id": CONTINUATION_MESSAGE_ID, "role": "user", "created_at": _EPOCH_ISO,
            "content": _continuation_text()}


def continuation_model_message() -> dict[str, Any]:
    """The reminder as the model call receives it (OpenAI-style chat message)."""
    return {"role": "user", "content": _continuation_text()}


def _observed_by(iso: str, as_of: datetime) -> bool:
    try:
        return parse_iso(iso) <= as_of
    except ValueError:  # a boundary that matches the pattern but is no real time (month 13)
        return False


def observations_as_of(active: str, as_of: datetime) -> str:
    """The observations that existed at ``as_of`` (``getObservationsAsOf``,
    docs/observational-memory.md#manual-api): the first
    chunk, plus each later chunk whose boundary time (the newest message it observed) is
    not after ``as_of``. Kept chunks are joined with their own boundary lines, so the result
    still splits into the same chunks. A naive ``as_of`` is taken as UTC."""
    if as_of.tzinfo is None:
        as_of = as_of.replace(tzinfo=UTC)
    first, rest = _split_with_dates(active.strip())
    kept = first.strip()
    for iso, chunk in rest:
        chunk = chunk.strip()
        if not chunk or not _observed_by(iso, as_of):
            continue
        kept = f"{kept}{message_boundary(iso)}{chunk}" if kept else chunk
    return kept
