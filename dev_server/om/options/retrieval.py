"""``retrieval``: observation groups, the ``recall`` tool and its instructions
(docs/observational-memory.md#retrieval). ``True`` is Mastra's defaults (no vector search,
scope ``resource``); ``False`` or nothing is off; an object sets ``vector``, ``scope``
(``"thread"`` | ``"resource"``) and ``instructions`` (appended to the built-in ones)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dev_server.om.options.checks import fail, flag, text, unknown

Scope = Literal["thread", "resource"]
_RETRIEVAL_KEYS = {"vector", "scope", "instructions"}


@dataclass(frozen=True)
class RetrievalConfig:
    """``retrieval``: observation groups, the ``recall`` tool and its instructions
    (docs/observational-memory.md#retrieval)."""

    vector: bool = False  # search by meaning (Memory.semantic_search); keyword search otherwise
    scope: Scope = "resource"  # what recall may read: the current thread, or all of the resource's
    instructions: str | None = None  # appended under "### Additional recall guidance"


def parse_retrieval(value: Any) -> RetrievalConfig | None:
    """``retrieval`` as options, or None when it is off."""
    if value is None or value is False:
        return None
    if value is True:
        return RetrievalConfig()
    if isinstance(value, RetrievalConfig):
        return value
    if not isinstance(value, Mapping):
        raise fail("retrieval", f"must be true, false or an object {{vector, scope, instructions}}, not {value!r}")
    unknown("retrieval.", value, _RETRIEVAL_KEYS)
    scope = value.get("scope", "resource")
    if scope not in ("thread", "resource"):
        raise fail("retrieval.scope", f"must be 'thread' or 'resource', not {scope!r}")
    instructions = text("retrieval.instructions", value.get("instructions"))
    return RetrievalConfig(vector=flag("retrieval.vector", value.get("vector")), scope=scope,
                           instructions=instructions.strip() if instructions and instructions.strip() else None)


def describe_retrieval(retrieval: RetrievalConfig | None) -> dict[str, Any] | bool:
    if retrieval is None:
        return False
    return {"vector": retrieval.vector, "scope": retrieval.scope, "instructions": retrieval.instructions}
