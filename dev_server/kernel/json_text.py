"""JSON text of any value, even one holding numbers JSON cannot carry.

Two kinds of Python numbers have no JSON text: non-finite floats (``inf``, ``nan``: the
standard library writes ``Infinity``, which JSON parsers, SQLite's JSON functions and DuckDB
refuse) and integers longer than Python's int-to-str limit (``sys.get_int_max_str_digits``,
4,300 digits by default: writing one raises ``ValueError``). ``Encoder`` writes strict JSON
and, only when that fails, the value with such numbers replaced (``representable``), so a
span attribute, a stored message or a stream chunk is always written and always valid.
``unrepresentable`` names the first such number, for a caller that refuses the value instead
(a tool's output is a tool error, ``dev_server.kernel.tools``).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any


def _too_long(value: int) -> bool:
    limit = sys.get_int_max_str_digits()
    # bit_length * log10(2) is within one of the digit count; repr is exact, and cheap below the limit
    if not limit or value.bit_length() * 0.30103 < limit - 1:
        return False
    try:
        int.__repr__(value)
    except ValueError:
        return True
    return False


def _digits(value: int) -> int:
    return int(math.log10(abs(value))) + 1


def unrepresentable(value: Any) -> str | None:
    """What in ``value`` (dicts, lists, tuples, scalars) JSON cannot carry, or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else f"a non-finite number ({value})"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"an integer of {_digits(value):,} digits" if _too_long(value) else None
    if isinstance(value, dict):
        items = value.values()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        return None
    for item in items:
        found = unrepresentable(item)
        if found is not None:
            return found
    return None


def representable(value: Any) -> Any:
    """``value`` with non-finite floats as null and over-long integers as a string saying
    how long they were."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return f"<an integer of {_digits(value):,} digits>" if _too_long(value) else value
    if isinstance(value, dict):
        return {key: representable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [representable(item) for item in value]
    return value


class Encoder:
    """``json.JSONEncoder(**options)`` that never fails on a number (see the module docstring);
    build one per set of options and reuse it (building an encoder costs more than a small encode)."""

    def __init__(self, **options: Any) -> None:
        self._strict = json.JSONEncoder(allow_nan=False, **options)

    def encode(self, value: Any) -> str:
        try:
            return self._strict.encode(value)
        except ValueError:  # an unrepresentable number (a circular value fails again below)
            return self._strict.encode(representable(value))
