"""How the ``recall`` tool shows stored messages (docs/observational-memory.md#retrieval, messages mode).

Each message is a header ``**role (YYYY-MM-DD HH:MM:SSZ)** [id]:`` and one line per part,
``  [pN] <text>``, N being the part's position in the stored message (``data-*`` and
``step-start`` parts are never shown, so numbers may skip). A completed tool invocation is
one ``tool-result`` part, a pending one a ``tool-call``.

At low detail a part is cut to a budget by kind (text 100 tokens, tool call or result 20,
anything else 30) and ends with a hint to read it whole, ``[recall cursor="<id>"
partIndex=N detail="high" for more]``. A page holds at most 2,000 tokens: under it, the
cut parts grow back in priority order (the user's text up to 200 tokens, the rest up to
50); over it, the page is cut and says so (``truncated``, ``tokenOffset``). High detail
shows parts whole (tool results up to 4,000 tokens); one part past a result's budget is
read in chunks from a character offset (``read_chunk``). Tokens are tokenx's
(``dev_server.kernel.tokenx``), as everywhere in OM.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dev_server.kernel.clock import parse_iso
from dev_server.kernel.messages import Message
from dev_server.kernel.tokenx import estimate_tokens
from dev_server.om.tokens.counting import format_tool_result

PAGE_TOKENS = 2_000
HIGH_TOOL_RESULT_TOKENS = 4_000
LOW_TOKENS = {"text": 100, "tool-call": 20, "tool-result": 20}
LOW_OTHER_TOKENS = 30
EXPAND_USER_TEXT_TOKENS = 200
EXPAND_OTHER_TOKENS = 50
_EXPAND_ORDER = {"text": 1, "reasoning": 1, "tool-result": 2, "tool-call": 3}


@dataclass
class ShownPart:
    message: Message
    index: int
    type: str
    full: str  # the whole part as text
    tool_name: str | None = None
    text: str = ""  # what the page shows of it

    @property
    def cut(self) -> bool:
        return self.text != self.full


def read_hint(message_id: str, index: int) -> str:
    return f'recall cursor="{message_id}" partIndex={index} detail="high"'


def cut_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` within ``max_tokens`` (all of it when it fits)."""
    if estimate_tokens(text) <= max_tokens:
        return text
    low, high = 0, len(text)
    while low < high:  # the largest length whose prefix fits
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle]) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def _capped(text: str, max_tokens: int, message_id: str, index: int) -> str:
    cut = cut_to_tokens(text, max_tokens)
    return text if cut == text else f"{cut.rstrip()}… [{read_hint(message_id, index)} for more]"


def timestamp(created_at: str) -> str:
    try:
        return parse_iso(created_at).strftime("%Y-%m-%d %H:%M:%SZ")
    except (TypeError, ValueError):
        return created_at


def _tool_parts(part: dict[str, Any], high: bool, whole: bool) -> tuple[str, str, str]:
    invocation = part.get("toolInvocation") or {}
    name = str(invocation.get("toolName") or "unknown")
    if invocation.get("state") == "result":
        mastra = (part.get("providerMetadata") or {}).get("mastra") or {}
        result = mastra["modelOutput"] if isinstance(mastra, dict) and "modelOutput" in mastra \
            else invocation.get("result")
        text = format_tool_result(result)
        if not whole:
            text = cut_to_tokens(text, HIGH_TOOL_RESULT_TOKENS)
        label = "Tool Error" if invocation.get("isError") else "Tool Result"
        return "tool-result", name, f"[{label}: {name}]\n{text}"
    args = invocation.get("args")
    shown = json.dumps(args, ensure_ascii=False, indent=2 if high else None, default=str) if args else ""
    separator = "\n" if high else " "
    return "tool-call", name, f"[Tool Call: {name}]" + (f"{separator}{shown}" if shown else "")


def _media(part: dict[str, Any], kind: str) -> tuple[str, str]:
    media = str(part.get("mimeType") or part.get("mediaType") or "")
    data = part.get("data") if kind == "file" else part.get("image")
    is_image = kind == "image" or media.startswith("image/") \
        or (isinstance(data, str) and data.startswith("data:image/"))
    label = part.get("filename") or media
    name = "Image" if is_image else "File"
    return ("image" if is_image else "file"), f"[{name}: {label}]" if label else f"[{name}]"


def message_parts(message: Message, *, high: bool = False, whole: bool = False) -> list[ShownPart]:
    """Every part of ``message`` that has something to show, as text: tool arguments
    pretty-printed when ``high``, tool results cut at 4,000 tokens unless ``whole``."""
    content = message.content if isinstance(message.content, dict) else {"content": message.content}
    parts = content.get("parts") or []
    if not parts and isinstance(content.get("content"), str) and content["content"]:
        return [ShownPart(message, 0, "text", content["content"])]
    shown = []
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            continue
        kind = str(part.get("type") or "")
        if not kind or kind.startswith("data-") or kind == "step-start":
            continue
        if kind == "text":
            shown.append(ShownPart(message, index, "text", str(part.get("text") or "")))
        elif kind == "reasoning":
            text = part.get("reasoning") or "".join(d.get("text", "") for d in part.get("details") or ()
                                                    if isinstance(d, dict))
            if text:
                shown.append(ShownPart(message, index, "reasoning", str(text)))
        elif kind == "tool-invocation":
            part_type, name, text = _tool_parts(part, high, whole)
            shown.append(ShownPart(message, index, part_type, text, tool_name=name))
        elif kind in ("file", "image"):
            part_type, text = _media(part, kind)
            shown.append(ShownPart(message, index, part_type, text))
        else:
            shown.append(ShownPart(message, index, kind, f"[{kind}]"))
    return shown


def matches(part: ShownPart, part_type: str | None, tool_name: str | None) -> bool:
    if part_type is not None and part.type != part_type:
        return False
    return tool_name is None or (part.type in ("tool-call", "tool-result") and part.tool_name == tool_name)


def low_detail(parts: Sequence[ShownPart]) -> list[ShownPart]:
    for part in parts:
        part.text = _capped(part.full, LOW_TOKENS.get(part.type, LOW_OTHER_TOKENS), part.message.id, part.index)
    return list(parts)


def render(parts: Sequence[ShownPart]) -> str:
    lines: list[str] = []
    current = None
    for part in parts:
        if part.message.id != current:
            current = part.message.id
            if lines:
                lines.append("")
            lines.append(f"**{part.message.role} ({timestamp(part.message.created_at)})** [{part.message.id}]:")
        lines.append(f"  [p{part.index}] {part.text}")
    return "\n".join(lines)


def _expand_priority(part: ShownPart) -> int:
    if part.message.role == "user" and part.type == "text":
        return 0
    return _EXPAND_ORDER.get(part.type, 4)


def render_page(parts: Sequence[ShownPart], budget: int = PAGE_TOKENS) -> tuple[str, bool, int]:
    """The page's text within ``budget`` tokens: (text, truncated, tokens left out).

    Under the budget, cut parts grow back, most useful first, while room is left."""
    text = render(parts)
    total = estimate_tokens(text)
    if total > budget:
        return cut_to_tokens(text, budget), True, total - budget
    remaining = budget - total
    for part in sorted((p for p in parts if p.cut), key=_expand_priority):
        if remaining <= 0:
            break
        limit = EXPAND_USER_TEXT_TOKENS if _expand_priority(part) == 0 else EXPAND_OTHER_TOKENS
        whole, shown = estimate_tokens(part.full), estimate_tokens(part.text)
        target = min(whole, limit)
        if target <= shown:
            continue
        if target == whole and target - shown <= remaining:
            part.text = part.full
            remaining -= target - shown
        else:
            grown = _capped(part.full, min(shown + remaining, limit), part.message.id, part.index)
            remaining -= estimate_tokens(grown) - shown
            part.text = grown
    text = render(parts)
    total = estimate_tokens(text)
    if total > budget:  # estimates of pieces and of the whole differ a little
        return cut_to_tokens(text, budget), True, total - budget
    return text, False, 0


def read_chunk(text: str, char_offset: int, budget: int = PAGE_TOKENS) -> tuple[str, int | None]:
    """The piece of ``text`` from ``char_offset`` that fits ``budget`` tokens, and where the
    next piece starts (None at the end)."""
    rest = text[char_offset:]
    piece = cut_to_tokens(rest, budget) or rest[:1]
    end = char_offset + len(piece)
    return piece, (end if end < len(text) else None)
