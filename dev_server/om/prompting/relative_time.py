"""Relative dates in observations: how long ago each dated note was, seen from today.

The observer writes absolute dates (``Date: Dec 4, 2025`` headers, ``(meaning May 30,
2025)`` at the end of a line). An actor model reasons badly about "how long ago was
Dec 4?", so before the observations are injected (``dev_server.om.prompting.context``,
docs/observational-memory.md#context) each date gains a relative phrase computed from
``now``, and a gap line such as ``[2 weeks later]`` marks a jump between consecutive headers.
Stored observations are never rewritten: the phrases would go stale the next day.

Dates are calendar dates: only ``now.date()`` matters, so an aware or naive ``now`` in the
user's zone gives that user's "today". The day count ``d`` (target date minus today for
the future, today minus target date for the past) maps to a phrase by these thresholds:

    d == 0          today
    d == 1          yesterday / tomorrow
    2 <= d < 7      N days ago / in N days
    7 <= d < 14     1 week ago / in 1 week
    14 <= d < 30    N weeks ago / in N weeks       (N = d // 7, so 2 to 4)
    30 <= d < 60    1 month ago / in 1 month
    60 <= d < 365   N months ago / in N months     (N = d // 30, so 2 to 12)
    d >= 365        N year(s) ago / in N year(s)   (N = d // 365; "1 year", "2 years")

A gap line goes before a header that is at least 2 days after the previous header, with
the same steps (``[N days later]``, ``[1 week later]``, ``[N weeks later]``,
``[1 month later]``, ``[N months later]``; months never turn into years). A header that is
not later than the one before it gets no gap line.

An inline ``(meaning <date>)`` or ``(estimated <date>)`` whose text ends in a four-digit
year becomes ``(meaning <date> - <relative>)``. When that date is before today and the
same line, before the parenthesis, speaks of intent (will, plans to, going to, wants to,
needs to, about to, looking forward to, intends to), ``, likely already happened`` is
added: a plan whose day has passed was probably carried out. The date inside may be
``May 30, 2025``, a range ``May 27-28, 2025`` (its first day), ``early/mid/late May 2025``
(the 7th, 15th or 23rd; in ``mid-to-late May`` the first word counts) or ``April to May
2025`` (the 1st of the second month); anything else is left as written. Today is not
"past": a plan for today may still be ahead.
"""

from __future__ import annotations

import re
from datetime import date, datetime

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_MONTH = r"[A-Za-z]{3,9}"  # checked against _MONTHS by month_number

_HEADER = re.compile(r"^(Date:\s*)(([A-Z][a-z]+) (\d{1,2}), (\d{4}))$", re.M)
_INLINE = re.compile(r"\((estimated|meaning)\s+([^)]+\d{4})\)", re.I)

_DAY_DATE = re.compile(rf"\b({_MONTH})\s+(\d{{1,2}}),?\s+(\d{{4}})\b")
_RANGE_DATE = re.compile(rf"\b({_MONTH})\s+(\d{{1,2}})-\d{{1,2}},?\s+(\d{{4}})\b")
_PART_OF_MONTH = re.compile(
    rf"\b(early|mid|late)[- ]?(?:to[- ]?(?:early|mid|late)[- ]?)?({_MONTH})\s+(\d{{4}})\b", re.I)
_MONTH_SPAN = re.compile(rf"\b({_MONTH})\s+to\s+(?:early\s+)?({_MONTH})\s+(\d{{4}})\b", re.I)
_DAY_OF_PART = {"early": 7, "mid": 15, "late": 23}

_FUTURE_INTENT = re.compile(
    r"\b(?:will\s+\w+|plans?\s+to|planning\s+to|going\s+to|wants?\s+to|needs?\s+to"
    r"|about\s+to|looking\s+forward\s+to|intends?\s+to)\b", re.I)


def month_number(word: str) -> int | None:
    """1-12 for a month name or its abbreviation (``Dec``, ``Sept``, ``December``)."""
    word = word.lower()
    if len(word) < 3:
        return None
    for number, name in enumerate(_MONTHS, start=1):
        if name.startswith(word):
            return number
    return None


def _calendar_date(year: str, month_word: str, day: int | str) -> date | None:
    month = month_number(month_word)
    if month is None:
        return None
    try:
        return date(int(year), month, int(day))
    except ValueError:  # Feb 30 and the like: leave the text as written
        return None


def parse_mentioned_date(text: str) -> date | None:
    """The calendar date an observer wrote inside ``(meaning …)``, or None."""
    for pattern in (_DAY_DATE, _RANGE_DATE):
        for match in pattern.finditer(text):
            found = _calendar_date(match[3], match[1], match[2])
            if found:
                return found
    for match in _PART_OF_MONTH.finditer(text):
        found = _calendar_date(match[3], match[2], _DAY_OF_PART[match[1].lower()])
        if found:
            return found
    for match in _MONTH_SPAN.finditer(text):
        if month_number(match[1]) is not None:
            found = _calendar_date(match[3], match[2], 1)
            if found:
                return found
    return None


def _steps(days: int) -> str:
    """``days`` (≥ 2) as "N days", "1 week", "N weeks", "1 month" or "N months"."""
    if days < 7:
        return f"{days} days"
    if days < 14:
        return "1 week"
    if days < 30:
        return f"{days // 7} weeks"
    if days < 60:
        return "1 month"
    return f"{days // 30} months"


def relative_phrase(target: date, today: date) -> str:
    """How ``target`` reads from ``today``: "today", "3 days ago", "in 2 weeks", …"""
    offset = (today - target).days
    distance = abs(offset)
    if distance == 0:
        return "today"
    if distance == 1:
        return "yesterday" if offset > 0 else "tomorrow"
    if distance >= 365:
        years = distance // 365
        span = f"{years} year" if years == 1 else f"{years} years"
    else:
        span = _steps(distance)
    return f"{span} ago" if offset > 0 else f"in {span}"


def gap_line(previous: date, current: date) -> str | None:
    """``[N days later]`` … ``[N months later]`` between two headers, None if under 2 days."""
    days = (current - previous).days
    return None if days <= 1 else f"[{_steps(days)} later]"


def _expand_inline_dates(text: str, today: date) -> str:
    def annotate(match: re.Match[str]) -> str:
        kind, written = match[1], match[2]
        target = parse_mentioned_date(written)
        if target is None:
            return match[0]
        phrase = relative_phrase(target, today)
        line_start = text.rfind("\n", 0, match.start()) + 1
        said_before = text[line_start:match.start()]
        if target < today and _FUTURE_INTENT.search(said_before):
            phrase += ", likely already happened"
        return f"({kind} {written} - {phrase})"

    return _INLINE.sub(annotate, text)


def add_relative_time_to_observations(text: str, now: datetime) -> str:
    """``text`` with relative phrases on date headers and inline dates, and gap lines
    between headers far apart (thresholds in the module docstring)."""
    today = now.date()
    text = _expand_inline_dates(text, today)
    pieces: list[str] = []
    written_up_to = 0
    previous: date | None = None
    for match in _HEADER.finditer(text):
        header_date = _calendar_date(match[5], match[3], match[4])
        if header_date is None:
            continue
        before = text[written_up_to:match.start()]
        pieces.append(before)
        gap = gap_line(previous, header_date) if previous is not None else None
        if gap:
            # on its own line, with a blank line on each side
            pieces.append(f"{gap}\n\n" if before.endswith("\n\n") else f"\n{gap}\n\n")
        pieces.append(f"{match[1]}{match[2]} ({relative_phrase(header_date, today)})")
        written_up_to = match.end()
        previous = header_date
    pieces.append(text[written_up_to:])
    return "".join(pieces)
