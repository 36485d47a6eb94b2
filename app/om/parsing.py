"""Reading what the observer and the reflector wrote (OBSERVATIONAL-MEMORY.md §4.3, §4.4).

A model's answer is free text that should hold an ``<observations>`` block and, for the
observer, the hint sections ``<current-task>``, ``<suggested-response>`` and
``<thread-title>``. Parsing is forgiving, because a model that half-follows the format
still observed something, and suspicious, because a model stuck in a loop writes the same
text until it runs out of tokens:

1. A degenerate answer (``detect_degenerate_repetition``) yields no observations and
   ``degenerate=True``; the caller retries once, then gives up.
2. Hint sections: the values of an ``<extracted-values>`` JSON object first, then the
   *last* ``<tag>...</tag>`` of each remaining one (the built-in hints are Mastra's inline
   extractors). These sections are cut out of the text before step 3.
3. Observations: every ``<observations>`` block whose tags start a line (any case), trimmed
   and joined by a newline; without one, only the list lines (``- ``, ``* ``, ``1. ``).
   The reflector falls back further, to the whole text, and also drops the ephemeral anchor
   ids (``[O12]``, ``[O3-N2]``) a model may copy from its input.
4. ``sanitize_observation_lines`` cuts any line over 10,000 characters.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

MAX_OBSERVATION_LINE_CHARS = 10_000
HINT_TAGS = ("current-task", "suggested-response", "thread-title")

_DEGENERATE_MIN_CHARS = 2000
_WINDOW_CHARS = 200
_MAX_LINE_CHARS = 50_000
_DUPLICATE_LINE_MIN_CHARS = 24
_DUPLICATE_LINE_MIN_COUNT = 20

_OBSERVATIONS_BLOCK = re.compile(r"^[ \t]*<observations>([\s\S]*?)^[ \t]*</observations>", re.M | re.I)
_LIST_LINE = re.compile(r"^\s*[-*]\s|^\s*\d+\.\s")
_EXTRACTED_VALUES = re.compile(r"<extracted-values>([\s\S]*?)</extracted-values>", re.I)
_ANCHOR_ID = re.compile(r"\[O\d+(?:-N\d+)*\][ \t]?")


@dataclass(frozen=True)
class ObserverOutput:
    observations: str
    current_task: str | None
    suggested_response: str | None
    thread_title: str | None
    degenerate: bool
    raw: str


@dataclass(frozen=True)
class ReflectorOutput:
    observations: str
    suggested_response: str | None
    degenerate: bool


def parse_observer_output(raw: str) -> ObserverOutput:
    if detect_degenerate_repetition(raw):
        return ObserverOutput("", None, None, None, True, raw)
    hints, rest = _take_hints(raw)
    blocks = _observation_blocks(rest)
    observations = blocks if blocks is not None else _list_lines(rest)
    return ObserverOutput(sanitize_observation_lines(observations), hints.get("current-task"),
                          hints.get("suggested-response"), hints.get("thread-title"), False, raw)


def parse_reflector_output(raw: str) -> ReflectorOutput:
    if detect_degenerate_repetition(raw):
        return ReflectorOutput("", None, True)
    hints, rest = _take_hints(raw)
    blocks = _observation_blocks(rest)
    observations = blocks if blocks is not None else (_list_lines(rest) or rest.strip())
    observations = _ANCHOR_ID.sub("", observations)
    return ReflectorOutput(sanitize_observation_lines(observations), hints.get("suggested-response"), False)


def sanitize_observation_lines(observations: str) -> str:
    """``observations`` with every line over 10,000 characters cut and marked."""
    if not observations:
        return observations
    lines = observations.split("\n")
    cut = [line[:MAX_OBSERVATION_LINE_CHARS] + " … [truncated]" if len(line) > MAX_OBSERVATION_LINE_CHARS else line
           for line in lines]
    return "\n".join(cut)


def detect_degenerate_repetition(text: str) -> bool:
    """True when ``text`` (2,000 characters or more) looks like a model repeating itself:
    (a) over 40% of its sampled 200-character windows repeat an earlier one, (b) a line is
    over 50,000 characters, or (c) over half of its substantial lines are duplicates."""
    if not text or len(text) < _DEGENERATE_MIN_CHARS:
        return False
    step = max(1, len(text) // 50)
    seen: set[str] = set()
    windows = repeated = 0
    for start in range(0, len(text) - _WINDOW_CHARS + 1, step):
        window = text[start:start + _WINDOW_CHARS]
        windows += 1
        if window in seen:
            repeated += 1
        seen.add(window)
    if windows > 5 and repeated / windows > 0.4:
        return True
    lines = text.split("\n")
    if any(len(line) > _MAX_LINE_CHARS for line in lines):
        return True
    substantial = [line.strip() for line in lines if len(line.strip()) >= _DUPLICATE_LINE_MIN_CHARS]
    if len(substantial) >= _DUPLICATE_LINE_MIN_COUNT:
        duplicates = len(substantial) - len(set(substantial))
        if duplicates / len(substantial) > 0.5:
            return True
    return False


def _take_hints(text: str) -> tuple[dict[str, str], str]:
    """The hint values (``<extracted-values>`` first, then the last tag of each) and ``text``
    without those sections."""
    values: dict[str, str] = {}
    for match in _EXTRACTED_VALUES.finditer(text):
        try:
            extracted = json.loads(match.group(1).strip())
        except ValueError:
            continue
        if isinstance(extracted, dict):
            for tag in HINT_TAGS:
                value = extracted.get(tag)
                if tag not in values and isinstance(value, str) and value.strip():
                    values[tag] = value.strip()
    text = _EXTRACTED_VALUES.sub("", text)
    for tag in HINT_TAGS:
        section = re.compile(rf"<{tag}>([\s\S]*?)</{tag}>", re.I)
        found = [m.group(1).strip() for m in section.finditer(text)]
        if tag not in values and found and found[-1]:
            values[tag] = found[-1]
        text = section.sub("", text)
    return values, text


def _observation_blocks(text: str) -> str | None:
    blocks = [m.group(1).strip() for m in _OBSERVATIONS_BLOCK.finditer(text)]
    if not blocks:
        return None
    return "\n".join(block for block in blocks if block)


def _list_lines(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if _LIST_LINE.match(line)).strip()
