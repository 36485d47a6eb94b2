"""A tool call's arguments in the observer's transcript: the outline Mastra's observer reads.

The expected texts are what @mastra/memory 1.31.0's formatter returns for the same values.
"""

from __future__ import annotations

import pytest

from dev_server.kernel.tokenx import estimate_tokens
from dev_server.om.prompting.tool_arguments import MAX_TOKENS, format_arguments


@pytest.mark.parametrize(("args", "expected"), [
    ({"query": "knee", "limit": 3, "filters": {"tags": ["health", "sport"], "since": None, "ok": True},
      "my-key": 1.5},
     'query: "knee"\nlimit: 3\nfilters: <object>\n["my-key"]: 1.5\nfilters.tags: <array, 2 items>\n'
     'filters.since: null\nfilters.ok: true\nfilters.tags[0]: "health"\nfilters.tags[1]: "sport"'),
    ({}, "arguments: [empty object]"),
    ("hello", '"hello"'),
    (None, "[arguments unavailable]"),
    ({"a": {"b": {"c": {"d": {"e": {"f": {"g": 1}}}}}}},
     "a: <object>\na.b: <object>\na.b.c: <object>\na.b.c.d: <object>\na.b.c.d.e: <object>\n"
     "a.b.c.d.e.f: <object> [max depth reached]"),
    ({"items": list(range(25))},
     "items: <array, 25 items>\nitems: ... [additional entries omitted]\n"
     + "\n".join(f"items[{i}]: {i}" for i in range(20))),
    ({"note": "x" * 200, "id": "a1"},
     'note: <string, 200 characters; preview size-limited>\nid: "a1"\nLarge string previews (size-limited):\n'
     "note:\n  | " + "x" * 200),
], ids=["nested", "empty", "string", "none", "deep", "long-array", "long-string"])
def test_arguments_are_laid_out_as_mastras_observer_reads_them(args: object, expected: str) -> None:
    assert format_arguments(args) == expected


def test_a_huge_string_is_previewed_within_the_budget_and_its_siblings_stay() -> None:
    shown = format_arguments({"text": "word " * 3000, "k": 1})
    assert shown.startswith("text: <string, 15000 characters; preview size-limited>\nk: 1\n"
                            "Large string previews (size-limited):\ntext:\n  | word word")
    assert shown.endswith("\n  | ... [5205 characters omitted]")  # Mastra's cut, to the character
    assert estimate_tokens(shown) <= MAX_TOKENS
