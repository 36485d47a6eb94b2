"""Text that UTF-8 can always encode.

A lone UTF-16 surrogate (``"\\ud800"``) is valid JSON, so one can arrive in a request, come
back from storage or be echoed by a model, and UTF-8 cannot encode it: every stream frame,
stored row and model message goes through ``repair_text`` / ``repair_value`` first, which
replace each lone surrogate with U+FFFD (pairs are recombined; well-formed text is returned
as is).
"""

from __future__ import annotations

from typing import Any


def repair_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (pairs are recombined)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def repair_value(value: Any) -> Any:
    """``repair_text`` applied to every string inside a JSON-like value."""
    if isinstance(value, str):
        return repair_text(value)
    if isinstance(value, list):
        return [repair_value(item) for item in value]
    if isinstance(value, dict):
        return {repair_text(k) if isinstance(k, str) else k: repair_value(v) for k, v in value.items()}
    return value
