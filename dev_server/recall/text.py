"""The text of a stored message that is embedded, and its pieces.

As Mastra: ``content.content`` when it is a non-blank string, else the message's ``text``
parts joined with a space (tool calls and results, data parts and files are not embedded).
A long text is cut at whitespace into pieces of at most ``limit`` characters (a word longer
than that is cut inside), each embedded on its own; a message scores by its best piece.
"""

from __future__ import annotations

from typing import Any

MAX_PIECES = 16  # a very long message is embedded by its first pieces only


def message_text(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, dict):
        return ""
    flat = content.get("content")
    if isinstance(flat, str) and flat.strip():
        return flat.strip()
    texts = [p.get("text", "") for p in content.get("parts") or () if isinstance(p, dict) and p.get("type") == "text"]
    return " ".join(t for t in texts if isinstance(t, str)).strip()


def pieces(text: str, limit: int) -> list[str]:
    out: list[str] = []
    current = ""
    for word in text.split():
        while len(word) > limit:
            if current:
                out.append(current)
                current = ""
            out.append(word[:limit])
            word = word[limit:]
        if current and len(current) + 1 + len(word) > limit:
            out.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
        if len(out) >= MAX_PIECES:
            return out[:MAX_PIECES]
    if current:
        out.append(current)
    return out[:MAX_PIECES] or [text[:limit]]
