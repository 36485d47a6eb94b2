"""A model's output budget, for the local observer and reflector: the observation lines that
fit in so many tokens.

A real observer writes a few thousand tokens per call whatever it reads, and a reflector
writes less the harder it is asked to compress; so do ours. When a log is over its budget,
``fitted`` keeps the newest lines of every priority first (recent context matters most),
then, further back, the most salient lines, newest first: 🔴 facts about the user
themselves, other 🔴 and ✅ lines, then 🟡, then the rest.
The lines it leaves out are counted in one ``* <mark> (HH:MM) Earlier: N observations
condensed`` line per ``<thread>`` block, where the first of them was. ``Date:`` lines with no
observation left under them go; thread tags stay (the caller decides about empty blocks).

Tokens are estimated as Observational Memory estimates them (``dev_server.kernel.tokenx``,
whose counts every threshold compares), line by line, a newline each (a little more than the
whole text's count); an exact tokenizer held ~75 MB in every process that ran a local cycle.
Only the lines that may be kept are counted, so a call costs about what its output costs,
not what its input does.
"""

from __future__ import annotations

import re

from dev_server.kernel.count_memo import CountMemo
from dev_server.kernel.tokenx import estimate_tokens
from dev_server.llm.local_om_text import REPEATS, TIME, is_observation, is_thread_tag

RECENT_SHARE = 0.5  # of a budget, for the newest lines whatever their priority
CONDENSED = re.compile(r"Earlier: ([\d,]+) observations? condensed")
_ABOUT_THE_USER = re.compile(r"\b(?:my name is|call me|i am|i'm|i live|i work|i have|i prefer|i like|i love|"
                            r"user(?:'s name| is called| lives| works| has| prefers| likes| loves))\b", re.I)
# A text is counted whole only up to this many characters per token of its budget; longer,
# it is over (English runs at ~4 characters a token, an observation log at fewer).
_CHARS_PER_TOKEN_AT_MOST = 16
_DATE_TOKENS = 10  # "Date: Sep 30, 2025" and its newline


def condensed_line(mark: str, time: str, count: int) -> str:
    return f"* {mark} ({time}) Earlier: {count} observation{'' if count == 1 else 's'} condensed"


def weight(line: str) -> int:
    """How many observations ``line`` stands for: what it condensed, or its repeat count."""
    if "condensed" in line and (found := CONDENSED.search(line)):
        return int(found.group(1).replace(",", ""))
    if line.endswith(" times)") and (found := REPEATS.search(line)):
        return int(found.group(1))
    return 1


def rank(line: str) -> int:
    """-1 for 🔴 facts about the user themselves (their name, where they live, what they
    have or prefer: what a model keeps whatever else goes), 0 for other 🔴 and ✅ lines, 1
    for 🟡 and unmarked ones, 2 for 🟢."""
    if "🔴" in line:
        return -1 if _ABOUT_THE_USER.search(line) else 0
    if "✅" in line:
        return 0
    return 2 if "🟢" in line else 1


def line_tokens(line: str) -> int:
    """A line's tokens and its newline's: the unit of every budget here (a log's lines are
    counted again and again as it is fitted at one level after another)."""
    return _line_tokens(line)


_line_tokens = CountMemo(lambda line: estimate_tokens(line) + 1, 1 << 13)


def tokens_of(lines: list[str]) -> int:
    return sum(map(line_tokens, lines))


def within(lines: list[str], budget: int) -> bool:
    return sum(map(len, lines)) <= _CHARS_PER_TOKEN_AT_MOST * budget and tokens_of(lines) <= budget


def fitted(lines: list[str], budget: int, *, mark: str) -> list[str]:
    """``lines`` (a log: ``Date:`` lines, thread tags, observations) within ``budget`` tokens;
    the condensed lines carry ``mark``."""
    if within(lines, budget):
        return lines
    def size(i: int) -> int:
        return line_tokens(lines[i])

    headers = _date_headers(lines)
    blocks = 1 + sum(1 for line in lines if line.startswith("<thread "))
    fixed = sum(size(i) for i, line in enumerate(lines) if is_thread_tag(line))
    # each block's condensed line, and the date line above it
    room = budget - fixed - blocks * (line_tokens(condensed_line(mark, "00:00", 10 ** 6)) + _DATE_TOKENS)
    kept: set[int] = set()
    chosen: list[int] = []  # in the order chosen: the last is the first to go
    paid: set[int] = set()  # the date lines the kept lines need
    used = 0

    def cost(i: int) -> int:
        header = headers[i]
        return size(i) + (size(header) if header >= 0 and header not in paid else 0)

    def keep(i: int) -> None:
        nonlocal used
        used += cost(i)
        kept.add(i)
        chosen.append(i)
        paid.add(headers[i])

    observations = [i for i, line in enumerate(lines) if is_observation(line)]
    for i in reversed(observations):
        if used + cost(i) > room * RECENT_SHARE:
            break
        keep(i)
    older: dict[int, list[int]] = {level: [] for level in (-1, 0, 1, 2)}
    for i in reversed(observations):
        if i not in kept:
            older[rank(lines[i])].append(i)
    for candidates in older.values():
        for i in candidates:
            if used + cost(i) > room:
                break
            keep(i)
    if not kept and observations:  # a budget under one line: the newest, rather than only a count
        keep(observations[-1])
    result = _render(lines, kept, mark)
    while len(kept) > 1 and not within(result, budget):
        kept.discard(chosen.pop())
        result = _render(lines, kept, mark)
    return result


def _date_headers(lines: list[str]) -> list[int]:
    """For each line, the index of the ``Date:`` line it falls under (-1 for none)."""
    headers, current = [], -1
    for i, line in enumerate(lines):
        if line.startswith("Date:"):
            current = i
        elif is_thread_tag(line):
            current = -1
        headers.append(current)
    return headers


def _render(lines: list[str], kept: set[int], mark: str) -> list[str]:
    result: list[str] = []
    dropped, first_at, first_time = 0, -1, "00:00"
    for i, line in enumerate(lines + ["</thread>"]):
        if is_thread_tag(line):
            if dropped:
                result.insert(first_at, condensed_line(mark, first_time, dropped))
            dropped, first_at = 0, -1
            if i < len(lines):
                result.append(line)
        elif i in kept or not is_observation(line):
            result.append(line)
        else:
            if first_at < 0:
                first_at = len(result)
                found = TIME.search(line)
                first_time = found.group(1) if found else "00:00"
            dropped += weight(line)
    return _without_empty_dates(result)


def _without_empty_dates(lines: list[str]) -> list[str]:
    result: list[str] = []
    for line in reversed(lines):
        if line.startswith("Date:") and not (result and is_observation(result[-1])):
            continue
        result.append(line)
    return result[::-1]
