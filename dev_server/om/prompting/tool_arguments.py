"""A tool call's arguments as the observer reads them: an outline, one field a line.

    Tool Call search: query: "knee"
    limit: 3
    filters: <object>
    filters.tags: <array, 2 items>
    filters.tags[0]: "health"

Fields are listed breadth-first (every top-level field before any nested one), so a large
early value cannot push a short sibling out of the budget; each line is a path and a value
(strings, numbers, booleans as JSON; a container as ``<object>`` or ``<array, N items>``, its
entries on later lines). A string over ``INLINE_STRING_CHARS`` is summarized in the outline
and shown after it as an indented preview cut to what the budget leaves. Limits: nesting
depth, entries per container and lines in all are bounded, and the whole stays within
``MAX_TOKENS`` tokens (Mastra's observer lays arguments out by the same rules).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from dev_server.kernel.tokenx import estimate_tokens

MAX_TOKENS = 2000
INLINE_STRING_CHARS = 160
MAX_DEPTH = 5
ENTRIES_PER_CONTAINER = 20
MAX_LINES = 100
MAX_PATH_CHARS = 160
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
SIZE_MARKER = "... [additional argument fields omitted by size limit]"


@dataclass(frozen=True)
class _Budget:
    tokens: float

    def fits(self, text: str) -> bool:
        return estimate_tokens(text) <= self.tokens


@dataclass(frozen=True)
class _Line:
    text: str
    depth: float
    order: int


def format_arguments(args: Any) -> str:
    """``args`` laid out for the observer (``[arguments unavailable]`` when the call has none)."""
    budget = _Budget(MAX_TOKENS)
    if args is None:
        return "[arguments unavailable]"
    if not isinstance(args, (dict, list)):
        if not isinstance(args, str) or len(args) <= INLINE_STRING_CHARS:
            value = _primitive(args)
            return value if budget.fits(value) else ("…" if budget.fits("…") else "")
        summary = f"<string, {len(args)} characters; preview size-limited>"
        shown = _joined(summary, _preview("preview", args, budget, summary), budget)
        return shown or (summary if budget.fits(summary) else ("…" if budget.fits("…") else ""))
    lines, long_strings = _outline(args)
    outline = _select(lines, budget)
    if not long_strings:
        return outline
    shown = _joined(outline, "Large string previews (size-limited):", budget)
    if shown is None:
        return outline
    added = skipped = 0
    for index, (path, text) in enumerate(long_strings):
        left = len(long_strings) - index
        share = _Budget(estimate_tokens(shown) + max(0, MAX_TOKENS - estimate_tokens(shown)) // left)
        longer = _joined(shown, _preview(path, text, share, shown), budget)
        if longer is None:
            skipped += 1
            continue
        shown, added = longer, added + 1
    if added == 0:
        return outline
    if skipped:
        shown = _joined(shown, f"... [{skipped} large string {'preview' if skipped == 1 else 'previews'} omitted]",
                        budget) or shown
    return shown


def _outline(args: dict[str, Any] | list[Any]) -> tuple[list[_Line], list[tuple[str, str]]]:
    lines: list[_Line] = []
    long_strings: list[tuple[str, str]] = []
    queue: list[tuple[str, Any, int, tuple[int, ...]]] = [("", args, 0, (id(args),))]
    full = False
    while queue and len(lines) < MAX_LINES:
        path, value, depth, ancestors = queue.pop(0)
        entries = list(enumerate(value)) if isinstance(value, list) else list(value.items())
        if not entries:
            kind = "array" if isinstance(value, list) else "object"
            lines.append(_Line(f"{path or 'arguments'}: [empty {kind}]", depth, len(lines)))
            continue
        if len(entries) > ENTRIES_PER_CONTAINER:
            entries = entries[:ENTRIES_PER_CONTAINER]
            rest = path or ("items" if isinstance(value, list) else "fields")
            lines.append(_Line(f"{rest}: ... [additional entries omitted]", depth, len(lines)))
        for key, item in entries:
            if len(lines) >= MAX_LINES:
                full = True
                break
            where = _path(path, key, isinstance(value, list))
            if isinstance(item, str) and len(item) > INLINE_STRING_CHARS:
                lines.append(_Line(f"{where}: <string, {len(item)} characters; preview size-limited>", depth,
                                   len(lines)))
                long_strings.append((where, item))
            elif not isinstance(item, (dict, list)):
                lines.append(_Line(f"{where}: {_primitive(item)}", depth, len(lines)))
            elif id(item) in ancestors:
                lines.append(_Line(f"{where}: [circular]", depth, len(lines)))
            elif depth >= MAX_DEPTH:
                lines.append(_Line(f"{where}: {_summary(item)} [max depth reached]", depth, len(lines)))
            else:
                lines.append(_Line(f"{where}: {_summary(item)}", depth, len(lines)))
                queue.append((where, item, depth + 1, (*ancestors, id(item))))
    if queue or full:
        lines.append(_Line("... [additional nested entries omitted by structure limit]", math.inf, len(lines)))
    return lines, long_strings


def _select(lines: list[_Line], budget: _Budget) -> str:
    """Every line when they fit; else the shallowest and shortest that fit, in their order,
    with a note that some were left out."""
    everything = _join(lines)
    if budget.fits(everything):
        return everything
    chosen: list[_Line] = []
    ranked = sorted(lines, key=lambda line: (line.depth, estimate_tokens(line.text), len(line.text), line.order))
    for line in ranked:
        if budget.fits(_join([*chosen, line], SIZE_MARKER)):
            chosen.append(line)
    shown = _join(chosen, SIZE_MARKER)
    if budget.fits(shown):
        return shown
    if budget.fits(SIZE_MARKER):
        return SIZE_MARKER
    return "…" if budget.fits("…") else ""


def _join(lines: list[_Line], marker: str | None = None) -> str:
    texts = [line.text for line in sorted(lines, key=lambda line: line.order)]
    return "\n".join([*texts, marker] if marker else texts)


def _preview(path: str, text: str, budget: _Budget, before: str = "") -> str:
    """The longest head of ``text`` that fits, shown as ``path:`` and ``  | `` lines."""

    def shown(length: int) -> str:
        head = text[:length]
        rest = len(text) - len(head)
        body = "\n".join(f"  | {line}" for line in head.split("\n"))
        return f"{path}:\n{body}" + (f"\n  | ... [{rest} characters omitted]" if rest > 0 else "")

    low, high, best = 0, len(text), ""
    while low <= high:
        middle = (low + high) // 2
        candidate = shown(middle)
        if budget.fits(f"{before}\n{candidate}" if before else candidate):
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    return best


def _joined(base: str, addition: str, budget: _Budget) -> str | None:
    if not addition:
        return None
    text = f"{base}\n{addition}" if base else addition
    return text if budget.fits(text) else None


def _path(parent: str, key: Any, in_list: bool) -> str:
    if in_list:
        return _short(f"{parent}[{key}]")
    name = str(key)
    segment = name if _IDENTIFIER.fullmatch(name) else f"[{json.dumps(name, ensure_ascii=False)}]"
    return _short(f"{parent}.{segment}" if parent else segment)


def _short(path: str) -> str:
    if len(path) <= MAX_PATH_CHARS:
        return path
    digest = 2166136261
    for char in path:
        digest = ((digest ^ ord(char)) * 16777619) & 0xFFFFFFFF
    return f"{path[:50]}…[{len(path) - 110} chars; {digest:08x}]…{path[-60:]}"


def _primitive(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return "-0" if math.copysign(1, value) < 0 and value == 0 else str(int(value))
    return str(value)


def _summary(value: dict[str, Any] | list[Any]) -> str:
    if isinstance(value, list):
        return f"<array, {len(value)} {'item' if len(value) == 1 else 'items'}>"
    return "<object>"

