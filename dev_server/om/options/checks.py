"""The checks every part of ``observationalMemory`` shares: errors that name the field
(``observationalMemory.observation.messageTokens must be ...``), and the options of
Mastra's that are refused here, each with its reason (docs/observational-memory.md#options)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Mastra's options that are refused here, and why (docs/observational-memory.md#options)
NOT_SUPPORTED = {
    "continuationHints": "is Mastra's, not supported here: the observer and reflector always write the current "
                         "task and suggested response",
    "experimental_subconscious": "is Mastra's experimental Subconscious, not supported here",
    "onIndexObservations": "is Mastra's, not supported here: with retrieval.vector the memory indexes the messages",
    "onDebugEvent": "is taken only by the standalone ObservationalMemory (dev_server.om.manual), as in Mastra",
    "storage": "is the standalone ObservationalMemory's store argument here, not an option",
    "memory": "is set by the memory itself here, not an option",
    "mastra": "is Mastra's internal wiring, not an option here",
    "onReflectionCommitted": "is Mastra's internal wiring, not an option here",
}


def fail(name: str, problem: str) -> ValueError:
    return ValueError(f"observationalMemory.{name} {problem}")


def positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise fail(name, f"must be a positive integer, not {value!r}")
    return value


def text(name: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise fail(name, "must be a string")
    return value or None


def unknown(name: str, given: Mapping[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(given) - allowed)
    if extra:
        reason = NOT_SUPPORTED.get(extra[0], f"is not an option (options: {', '.join(sorted(allowed))})")
        raise fail(f"{name}{extra[0]}" if name else extra[0], reason)


def flag(name: str, value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise fail(name, "must be true or false")
    return value
