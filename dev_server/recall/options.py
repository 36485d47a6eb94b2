"""``semanticRecall``: Mastra's options, checked once, at construction.

``true`` means the defaults; an object may give ``topK`` (how many nearest messages,
default 4), ``messageRange`` (neighbours shown around each: a number for both sides, or
``{before, after}``; default 1) and ``scope`` (``"resource"``, every thread of the user,
the default as in Mastra, or ``"thread"``). A bad value fails naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

TOP_K = 4
MESSAGE_RANGE = 1
MAX_TOP_K = 100
MAX_RANGE = 50
_KEYS = {"topK", "messageRange", "scope", "threshold", "indexName"}


@dataclass(frozen=True)
class SemanticRecallOptions:
    top_k: int = TOP_K
    before: int = MESSAGE_RANGE
    after: int = MESSAGE_RANGE
    scope: Literal["thread", "resource"] = "resource"
    threshold: float | None = None  # minimum cosine similarity of a hit (Mastra's vector query threshold)

    def describe(self) -> dict[str, Any]:
        """As ``GET /memory/config`` reports it."""
        body: dict[str, Any] = {"topK": self.top_k, "messageRange": {"before": self.before, "after": self.after},
                                "scope": self.scope}
        if self.threshold is not None:
            body["threshold"] = self.threshold
        return body


def semantic_recall_options(value: Any) -> SemanticRecallOptions | None:
    """The resolved options, None when off (``False``/``None``); ValueError names the field."""
    if value is None or value is False:
        return None
    if value is True:
        return SemanticRecallOptions()
    if isinstance(value, SemanticRecallOptions):
        return value
    if not isinstance(value, dict):
        raise ValueError("semanticRecall must be true, false or an object")
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise ValueError(f"semanticRecall.{unknown[0]} is not an option (expected one of {', '.join(sorted(_KEYS))})")
    top_k = _count("semanticRecall.topK", value.get("topK", TOP_K), 1, MAX_TOP_K)
    before = after = MESSAGE_RANGE
    span = value.get("messageRange", MESSAGE_RANGE)
    if isinstance(span, dict):
        extra = sorted(set(span) - {"before", "after"})
        if extra:
            raise ValueError(f"semanticRecall.messageRange.{extra[0]} is not an option (before, after)")
        before = _count("semanticRecall.messageRange.before", span.get("before", 0), 0, MAX_RANGE)
        after = _count("semanticRecall.messageRange.after", span.get("after", 0), 0, MAX_RANGE)
    else:
        before = after = _count("semanticRecall.messageRange", span, 0, MAX_RANGE)
    scope = value.get("scope", "resource")
    if scope not in ("thread", "resource"):
        raise ValueError(f"semanticRecall.scope must be 'thread' or 'resource', not {scope!r}")
    threshold = value.get("threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                  or not -1 <= threshold <= 1):
        raise ValueError("semanticRecall.threshold must be a number between -1 and 1")
    return SemanticRecallOptions(top_k, before, after, scope, None if threshold is None else float(threshold))


def _count(field: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{field} must be a whole number from {low} to {high}, not {value!r}")
    return value
