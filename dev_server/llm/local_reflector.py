"""The built-in local model as Observational Memory's reflector, offline.

``dev_server.llm.local_observer.om_reply`` hands it the requests whose system prompt starts with
``REFLECTOR_IDENTITY`` (``dev_server.kernel.prompt_marks``); the answer is the text itself, in the format
``dev_server.om.prompting.parsing`` reads.

It takes the observations under ``## OBSERVATIONS TO REFLECT ON`` and the compression level
from its heading, and keeps every date line, 🔴 and ✅ line; it drops 🟢 lines, and from
level 2 also 🟡 and unmarked lines. An observation said again the same day is merged into
its first line, the counts added up (``dev_server.llm.local_om_text.merged_repeats``). From level 3
only the newest half (level 4: quarter) of each date's 🔴 lines stay, after one
``* 🔴 (HH:MM) Earlier: N observations condensed`` line.

Then, like a model asked for less detail at each level, it writes at most ``DETAIL[level]``
(0.8, 0.6, 0.4, 0.2 for levels 1-4) of what it writes at level 0 (detail 10/10: the rules
above, within ``REFLECTION_TOKENS``, a model's output budget), and less than it would write
one level lower, so every retry of the engine's escalation shrinks the answer; never less
than ``FLOOR`` of its input, which the engine's collapse check would reject, nor than
``SMALLEST`` tokens (a few lines are left to the rules). What is over the budget goes as
``dev_server.llm.local_om_budget.fitted`` decides: newest detail and the user's facts stay.
Started at level 1 (any model but Gemini 2.5 Flash), a log of any size up to ~530k tokens
comes back at most 0.8 x 32,000 = 25,600 tokens long: under the default threshold of 40,000
at the first attempt.

Reflector triggers ride in the log it reflects: the observer keeps a ``[[reflector-...]]``
trigger in the user statement it quotes, so a user message holding one reaches the
reflector whenever that statement is reflected:

* ``[[reflector-prose]]`` -- a paragraph of prose, no ``<observations>`` block;
* ``[[reflector-refusal]]`` -- a bare refusal;
* ``[[reflector-empty]]`` -- an empty ``<observations>`` block;
* ``[[reflector-degenerate]]`` -- one line repeated ~5,000 characters long;
* ``[[reflector-collapse]]`` -- a single short line, whatever the log's size.

Deterministic: the same log always gives the same answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dev_server.kernel.prompt_marks import COMPRESSION_HEADINGS, REFLECT_HEADING, REFLECTION_REQUEST
from dev_server.llm.local_om_budget import fitted, tokens_of, weight
from dev_server.llm.local_om_text import (
    TIME,
    degenerate_log,
    is_observation,
    is_thread_tag,
    merged_repeats,
    user_text_under,
)

REFLECTOR_ANSWERS = {
    "[[reflector-prose]]": "I have reviewed these observations. The user has shared a number of personal details and "
                           "plans, and the assistant has been helpful throughout the conversation.",
    "[[reflector-refusal]]": "I'm sorry, but I can't help with condensing these observations.",
    "[[reflector-empty]]": "<observations>\n</observations>",
    "[[reflector-collapse]]": "<observations>\n* 🔴 (00:00) User talked.\n</observations>",
}
REFLECTOR_DEGENERATE_TRIGGER = "[[reflector-degenerate]]"
# The share of level 0's answer a reflection may keep at each compression level: the detail
# the guidance asks for (8/10 at level 1 ... 2/10 at level 4); level 0 within a model's output
# budget; never under FLOOR of the input (a reflection under 5 % of its input is rejected as
# a collapse, dev_server.om.engine.output_check).
DETAIL = {0: 1.0, 1: 0.8, 2: 0.6, 3: 0.4, 4: 0.2}
REFLECTION_TOKENS = 32_000
FLOOR = 0.06
SMALLEST = 200  # a log this small is left to the level's rules: a model would not cut a few lines further


def reflector_answer(messages: Sequence[dict[str, Any]]) -> str:
    prompt = user_text_under(messages, REFLECT_HEADING)
    end = prompt.rfind(f"\n\n---\n\n{REFLECTION_REQUEST}")
    observations = prompt[:end] if end >= 0 else prompt
    if REFLECTOR_DEGENERATE_TRIGGER in observations:
        return degenerate_log()
    for trigger, answer in REFLECTOR_ANSWERS.items():
        if trigger in observations:
            return answer
    level = _compression_level(prompt[end:] if end >= 0 else "")
    return "<observations>\n" + "\n".join(reflected(observations.split("\n"), level)) + "\n</observations>"


def reflected(lines: list[str], level: int) -> list[str]:
    """The reflection of ``lines`` at compression ``level``: the level's rules, within the
    level's budget, and smaller than the level below would write while that holds more than
    one observation (so each retry of the engine's escalation shrinks the answer)."""
    source = tokens_of(lines)
    full = min(source, REFLECTION_TOKENS)  # detail 10/10: level 0's budget, then its answer
    result: list[str] = []
    for step in range(level + 1):
        budget = DETAIL[step] * full
        if step and _observations(result) > 1:
            budget = min(budget, tokens_of(result) - 1)
        kept = _by_rules(lines, step)
        if _observations(kept) > 1:
            budget = max(round(budget), math.ceil(FLOOR * source), SMALLEST)
            kept = _without_empty_headers(fitted(kept, budget, mark="🔴"))
        result = kept
        if step == 0:
            full = tokens_of(result)
    return result


def _observations(lines: list[str]) -> int:
    return sum(1 for line in lines if is_observation(line))


def _by_rules(lines: list[str], level: int) -> list[str]:
    kept: list[str] = []
    date: str | None = None
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("Date:"):
            if stripped != date:
                kept.append(stripped)
                date = stripped
        elif is_thread_tag(stripped):
            kept.append(stripped)
            date = None
        elif ("🔴" in line or "✅" in line
              or level < 2 and stripped and not stripped.startswith("--- ") and "🟢" not in line):
            kept.append(line)
    kept = merged_repeats(kept)
    if level >= 3:
        kept = _condensed(kept, 2 if level == 3 else 4)
    kept = _without_empty_headers(kept)
    if not any(is_observation(line) for line in kept):
        # Everything was low priority: keep the newest observation rather than wipe the memory.
        dated = [line.strip() for line in lines if line.strip().startswith("Date:")]
        newest = next((line for line in reversed(lines) if is_observation(line)), None)
        kept = dated[-1:] + [newest] if newest else []
    return kept


def _condensed(lines: list[str], keep_one_in: int) -> list[str]:
    """``lines`` with, in each date section, only the newest 1/``keep_one_in`` of the 🔴 lines,
    after one line counting the others."""
    result: list[str] = []
    section: list[str] = []
    for line in [*lines, "Date: end"]:
        if not (line.startswith("Date:") or is_thread_tag(line)):
            section.append(line)
            continue
        reds = [i for i, item in enumerate(section) if "🔴" in item and "✅" not in item]
        dropped = set(reds[: len(reds) - math.ceil(len(reds) / keep_one_in)])
        if dropped:
            count = sum(weight(section[i]) for i in dropped)
            first = TIME.search(section[min(dropped)])
            result.append(f"* 🔴 ({first.group(1) if first else '00:00'}) Earlier: {count} observations condensed")
        result.extend(item for i, item in enumerate(section) if i not in dropped)
        result.append(line)
        section = []
    return result[:-1]


def _without_empty_headers(lines: list[str]) -> list[str]:
    """``lines`` without date lines and thread blocks that hold no observation."""
    result: list[str] = []
    for line in reversed(lines):
        following = result[-1] if result else "</thread>"
        if line.startswith("Date:") and not is_observation(following):
            continue
        if line.startswith("<thread ") and following == "</thread>":
            result.pop()
            continue
        result.append(line)
    return result[::-1]


def _compression_level(guidance: str) -> int:
    by_heading = {heading: level for level, heading in COMPRESSION_HEADINGS.items()}
    levels = [by_heading[line.strip()] for line in guidance.split("\n") if line.strip() in by_heading]
    return levels[-1] if levels else 0
