"""A count per text, remembered without the text.

The local model and its observer price the same texts turn after turn (a turn's window
repeats the last turn's; a log's lines are fitted again at every level). A cache keyed by
the text itself (``functools.lru_cache``) keeps every text it has seen alive: 4,096 texts of
up to 8 KB and 8,192 log lines were 50 MB of a gateway worker's heap after five minutes of a
soak, most of its growth. ``CountMemo`` keys a count by the text's hash instead, so what it
holds is two integers a text, whatever the text's size.

Two different texts of the same 64-bit hash would share a count: a chance below one in 10^10
among the 32,768 texts the local model's memo holds at most, for an estimate of tokens.
"""

from __future__ import annotations

from collections.abc import Callable


class CountMemo:
    """``count(text)``, remembered for at least the last ``size`` texts used and at most
    twice as many: two generations of counts, the recent one filled until it is full, when it
    becomes the older one and the oldest is dropped (a text found among the older moves up).
    Plain dict reads and writes: safe in any thread, at worst a text is counted twice."""

    def __init__(self, count: Callable[[str], int], size: int) -> None:
        self._count = count
        self._size = size
        self._recent: dict[int, int] = {}
        self._older: dict[int, int] = {}

    def __call__(self, text: str) -> int:
        key = hash(text)
        counted = self._recent.get(key)
        if counted is None:
            counted = self._older.get(key)
            if counted is None:
                counted = self._count(text)
            if len(self._recent) >= self._size:
                self._older, self._recent = self._recent, {}
            self._recent[key] = counted
        return counted

    def __len__(self) -> int:
        return len(self._recent.keys() | self._older.keys())
