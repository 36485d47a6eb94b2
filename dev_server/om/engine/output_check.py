"""Is a model's answer fit to become memory? The checks a cycle makes before it writes.

The observer's answer is appended to the log and the reflector's *replaces* it (or, for a
buffered reflection, replaces its oldest lines), so an answer that is not observations
would cost the thread its memory. ``dev_server.om.prompting.parsing`` reads answers forgivingly, as Mastra
does (without an ``<observations>`` block the reflector's whole text is taken); these checks
then decide whether what was read is observations at all. A rejected answer is a failed
cycle: a ``-failed`` part naming the problem, the record untouched, retried where the cycle
retries (the observer once, the reflector up the compression ladder).

An answer is rejected when

* it is degenerate: the repetition ``dev_server.om.prompting.parsing.detect_degenerate_repetition`` finds in
  long answers, or, in a shorter one, more than half of 10+ substantial lines repeated;
* it holds no observation line: nothing that starts like a line of the format (a list
  bullet ``-``/``*``/``•``/``1.``, a priority emoji, or a ``(HH:MM)`` time). Date lines,
  ``<thread>`` and ``<observation-group>`` tags and message boundaries are structure, not
  observations; prose, an empty block and a bare refusal all end up here;
* every observation line is the model speaking about itself ("I'm sorry, I can't ..."):
  a refusal written as a list;
* (reflections only) it keeps under 5% of the tokens it was given, from 500 tokens of
  input on: Mastra's most aggressive compression level asks for a fifth of the detail, so
  a log that collapses to a line or two lost the memory rather than condensed it. Smaller
  logs may legitimately shrink to a line. What it was given is counted as its distinct
  observations (``distinct_observations``: times, bullets and repeat counts aside, each
  line once): a log that says one thing a hundred times may well shrink to one line.

Mastra, for comparison, takes prose as the reflection, accepts an observer answer with no
observations, and checks neither refusals nor size; it rejects only degenerate output and
an empty reflection.
"""

from __future__ import annotations

import re

MIN_KEPT_SHARE = 0.05  # a reflection keeping less of its input than this is no reflection
SIZE_CHECKED_FROM = 500  # input tokens from which the size check applies

_OBSERVATION_LINE = re.compile(r"^\s*(?:[-*•]\s|\d+\.\s|[🔴🟡🟢✅]|\(\d{1,2}:\d{2}\))")
_LINE_PREFIX = re.compile(r"^\s*(?:[-*•]\s+|\d+\.\s+)?(?:[🔴🟡🟢✅]\s*)?(?:\(\d{1,2}:\d{2}\)\s*)?")
_REFUSAL = re.compile(r"^(?:i['’]m sorry|i am sorry|sorry\b|i apologi[sz]e|i can(?:no|['’])t|i cannot"
                      r"|i['’]m (?:not able|unable)|i am (?:not able|unable)|i won['’]t|as an ai\b)", re.I)
_REPEAT_COUNT = re.compile(r"\s*\(\d+ times\)$")
_REPEATED_MIN_LINES = 10
_REPEATED_MIN_CHARS = 24


def observation_lines(text: str) -> list[str]:
    """The lines of ``text`` shaped like observations (structure lines left out)."""
    return [line for line in text.split("\n") if _OBSERVATION_LINE.match(line)]


def format_problem(text: str) -> str | None:
    """Why ``text`` (observations as parsed) is not observations, or None when it is."""
    if not text.strip():
        return "empty: no observations"
    lines = observation_lines(text)
    if not lines:
        return "not in the observations format (no observation lines)"
    if all(_REFUSAL.match(_LINE_PREFIX.sub("", line, count=1)) for line in lines):
        return "a refusal, not observations"
    substantial = [line.strip() for line in lines if len(line.strip()) >= _REPEATED_MIN_CHARS]
    if len(substantial) >= _REPEATED_MIN_LINES and len(substantial) - len(set(substantial)) > len(substantial) / 2:
        return "degenerate output (the same lines repeated)"
    return None


def distinct_observations(text: str) -> str:
    """The observation lines of ``text``, each once, without their bullet, priority, time
    and repeat count: what a reflection of ``text`` has to keep."""
    seen: dict[str, None] = {}
    for line in observation_lines(text):
        seen.setdefault(_REPEAT_COUNT.sub("", _LINE_PREFIX.sub("", line, count=1)).strip(), None)
    return "\n".join(seen)


def observer_problem(observations: str, degenerate: bool) -> str | None:
    """Why the observer's parsed answer must not be appended, or None."""
    if degenerate:
        return "degenerate output (repetition)"
    return format_problem(observations)


def reflection_problem(observations: str, degenerate: bool, *, tokens: int, source_tokens: int) -> str | None:
    """Why the reflector's parsed answer (``tokens`` long, from ``source_tokens`` of log)
    must not replace the log, or None."""
    if degenerate:
        return "degenerate output (repetition)"
    problem = format_problem(observations)
    if problem is None and source_tokens >= SIZE_CHECKED_FROM and tokens < MIN_KEPT_SHARE * source_tokens:
        problem = f"far too small ({tokens} tokens kept of {source_tokens}, under {MIN_KEPT_SHARE:.0%})"
    return problem
