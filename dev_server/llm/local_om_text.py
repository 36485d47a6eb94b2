"""What the local observer and reflector both read and write: the text of an observer or
reflector request (its system prompt, the user text under a heading), and the lines of an
observation log (``Date:`` lines, ``<thread>`` tags, observations with their time and the
count of their repeats).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

QUOTE_CHARS = 200  # a quoted statement is cut to this
DEGENERATE_CHARS = 5000  # the length of the repeated answers the degenerate triggers ask for
TIME = re.compile(r"\((\d{1,2}:\d{2})\)")
TIME_PREFIX = re.compile(r"\(\d{1,2}:\d{2}\) ")
REPEATS = re.compile(r" \((\d+) times\)$")


def system_text(messages: Sequence[dict[str, Any]]) -> str:
    return next((first_text(m.get("content")).lstrip() for m in messages if m.get("role") == "system"), "")


def user_text_under(messages: Sequence[dict[str, Any]], heading: str) -> str:
    """The text after ``heading`` in the last user message that starts with it."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        text = first_text(message.get("content"))
        if text.startswith(heading):
            return text[len(heading):].lstrip("\n")
    return ""


def first_text(content: Any) -> str:
    """The first text of a message: attachments, and the placeholders that may replace them, are not transcript."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return next((p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"), "")
    return ""


def is_thread_tag(line: str) -> bool:
    return line.startswith("<thread ") or line == "</thread>"


def is_observation(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("Date:") and not is_thread_tag(stripped)


def merged_repeats(lines: list[str]) -> list[str]:
    """``lines`` with each observation said again the same day (time and count aside)
    merged into its first line, the counts added up as `` (N times)``."""
    result: list[str] = []
    first: dict[str, int] = {}
    counts: dict[int, int] = {}
    for line in lines:
        if line.startswith("Date:") or is_thread_tag(line):
            first.clear()
            result.append(line)
            continue
        repeated = REPEATS.search(line) if line.endswith(" times)") else None
        times = 1
        if repeated:
            times, line = int(repeated.group(1)), line[:repeated.start()]
        key = TIME_PREFIX.sub("", line.strip(), count=1)
        if key in first:
            counts[first[key]] += times
            continue
        first[key] = len(result)
        counts[len(result)] = times
        result.append(line)
    return [f"{line} ({counts[i]} times)" if counts.get(i, 1) > 1 else line for i, line in enumerate(result)]


def degenerate_log() -> str:
    line = ("* 🔴 (00:00) User stated the same thing again and again and again " * 4)[:QUOTE_CHARS]
    return "<observations>\n" + f"{line}\n" * (DEGENERATE_CHARS // (len(line) + 1) + 1) + "</observations>"
