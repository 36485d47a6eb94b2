"""Reading what the observer and the reflector wrote (docs/observational-memory.md#prompts, #reflection).

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

Whether what was read is observations at all (prose read as the whole text, a refusal, an
empty block) is for ``dev_server.om.engine.output_check`` to say, before a cycle writes it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dev_server.om.options.extractors import take_inline_values

MAX_OBSERVATION_LINE_CHARS = 10_000
HINT_TAGS = ("current-task", "suggested-response", "thread-title")

_DEGENERATE_MIN_CHARS = 2000
_WINDOW_CHARS = 200
_MAX_LINE_CHARS = 50_000
_DUPLICATE_LINE_MIN_CHARS = 24
_DUPLICATE_LINE_MIN_COUNT = 20

_OBSERVATIONS_BLOCK = re.compile(r"^[ \t]*<observations>([\s\S]*?)^[ \t]*</observations>", re.M | re.I)
_LIST_LINE = re.compile(r"^\s*[-*]\s|^\s*\d+\.\s")
_ANCHOR_ID = re.compile(r"\[O\d+(?:-N\d+)*\][ \t]?")


@dataclass(frozen=True)
class ObserverOutput:
    observations: str
    current_task: str | None
    suggested_response: str | None
    thread_title: str | None
    degenerate: bool
    raw: str
    extracted: dict[str, Any] = field(default_factory=dict)  # inline extractor values by slug (hints included)


@dataclass(frozen=True)
class ReflectorOutput:
    observations: str
    suggested_response: str | None
    degenerate: bool
    extracted: dict[str, Any] = field(default_factory=dict)


def parse_observer_output(raw: str, slugs: Sequence[str] = ()) -> ObserverOutput:
    """``slugs``: the inline extractors asked for besides the hint sections."""
    if detect_degenerate_repetition(raw):
        return ObserverOutput("", None, None, None, True, raw)
    values, rest = take_inline_values(raw, [*HINT_TAGS, *(s for s in slugs if s not in HINT_TAGS)])
    blocks = _observation_blocks(rest)
    observations = blocks if blocks is not None else _list_lines(rest)
    return ObserverOutput(sanitize_observation_lines(observations), _text(values.get("current-task")),
                          _text(values.get("suggested-response")), _text(values.get("thread-title")), False, raw,
                          values)


def parse_reflector_output(raw: str, slugs: Sequence[str] = ()) -> ReflectorOutput:
    if detect_degenerate_repetition(raw):
        return ReflectorOutput("", None, True)
    values, rest = take_inline_values(raw, [*HINT_TAGS, *(s for s in slugs if s not in HINT_TAGS)])
    blocks = _observation_blocks(rest)
    observations = blocks if blocks is not None else (_list_lines(rest) or rest.strip())
    observations = _ANCHOR_ID.sub("", observations)
    return ReflectorOutput(sanitize_observation_lines(observations), _text(values.get("suggested-response")), False,
                           values)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


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


def _observation_blocks(text: str) -> str | None:
    blocks = [m.group(1).strip() for m in _OBSERVATIONS_BLOCK.finditer(text)]
    if not blocks:
        return None
    return "\n".join(block for block in blocks if block)


def _list_lines(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if _LIST_LINE.match(line)).strip()
