"""The local model's working-memory phrases (documented in ``dev_server.llm.local_model``).

It reads the working memory from the system message ``dev_server.memory.working_document``
writes (between its data and template tags, ``dev_server.kernel.prompt_marks``), so what it answers is what was
injected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dev_server.kernel.prompt_marks import (
    DATA_CLOSE,
    DATA_OPEN,
    EMPTY_DATA,
    INSTRUCTION_HEADER,
    TEMPLATE_CLOSE,
    TEMPLATE_OPEN,
)

_REMEMBER = re.compile(r"\bremember\s+that\s+(.+)", re.I | re.S)
_ABOUT_ME = re.compile(r"\bwhat\s+do\s+you\s+(?:know|remember)\s+about\s+me\b", re.I)
_LABEL_LINE = re.compile(r"^(\s*[-*]\s+\*\*(.+?)\*\*:)\s*(.*)$")
_HEADING_LINE = re.compile(r"^#+\s+(.+)$")
_WORD = re.compile(r"[a-z0-9]{3,}")


def remembered_fact(text: str) -> str | None:
    """The fact of a "remember that <fact>" message, or None."""
    match = _REMEMBER.search(text)
    return " ".join(match.group(1).split()).rstrip(".!") if match else None


def asks_about_me(text: str) -> bool:
    return _ABOUT_ME.search(text) is not None


@dataclass(frozen=True)
class InjectedMemory:
    """The working memory a system message gave the model."""

    data: str | None
    template: str
    is_json: bool


def injected_memory(system_texts: Iterable[str]) -> InjectedMemory | None:
    """The working memory in the first system text that carries one."""
    for text in system_texts:
        if not text.startswith(INSTRUCTION_HEADER) or DATA_OPEN not in text:
            continue
        data = _between(text, DATA_OPEN, DATA_CLOSE)
        template = _between(text, TEMPLATE_OPEN, TEMPLATE_CLOSE)
        try:
            is_json = isinstance(json.loads(template), dict)
        except ValueError:
            is_json = False
        return InjectedMemory(None if data == EMPTY_DATA else data, template, is_json)
    return None


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0].strip("\n")


def remembered(memory: InjectedMemory, fact: str) -> Any:
    if memory.is_json:
        try:
            stored = json.loads(memory.data or "{}")
        except ValueError:
            stored = {}
        facts = stored.get("facts") if isinstance(stored, dict) else None
        return {"facts": [*(facts if isinstance(facts, list) else []), fact]}
    lines = (memory.data or memory.template).rstrip("\n").split("\n")
    words = set(_WORD.findall(fact.lower()))
    labels = [(i, m) for i, m in ((i, _LABEL_LINE.match(line)) for i, line in enumerate(lines)) if m]
    fitting = next((i for i, m in labels if words & set(_WORD.findall(m.group(2).lower()))), None)
    if fitting is None:
        fitting = next((i for i, m in labels if m.group(2).strip().lower() == "facts"), None)
    if fitting is not None:
        head, value = _LABEL_LINE.match(lines[fitting]).group(1, 3)
        if not value:
            lines[fitting] = f"{head} {fact}"
        else:
            end = fitting + 1
            while end < len(lines) and lines[end].startswith(("  ", "\t")):
                end += 1
            lines.insert(end, f"  - {fact}")
        return "\n".join(lines) + "\n"
    headings = [i for i, line in enumerate(lines) if _HEADING_LINE.match(line)]
    section = next((i for i in headings if words & set(_WORD.findall(lines[i].lower()))), None)
    if section is None:
        lines.append(f"- {fact}")
    else:
        end = next((i for i in headings if i > section), len(lines))
        while end > section + 1 and not lines[end - 1].strip():
            end -= 1
        lines.insert(end, f"- {fact}")
    return "\n".join(lines) + "\n"


def known_about_user(memory: InjectedMemory) -> str:
    items: list[str] = []
    if memory.is_json:
        try:
            stored = json.loads(memory.data or "{}")
        except ValueError:
            stored = {}
        for key, value in (stored.items() if isinstance(stored, dict) else ()):
            shown = ", ".join(map(str, value)) if isinstance(value, list) else json.dumps(value) \
                if isinstance(value, dict) else str(value)
            items.append(f"{key}: {shown}")
    else:
        for line in (memory.data or "").split("\n"):
            label = _LABEL_LINE.match(line)
            if label:
                if label.group(3).strip():
                    items.append(f"{label.group(2).strip()}: {label.group(3).strip()}")
            elif line.strip() and not _HEADING_LINE.match(line.strip()):
                items.append(line.strip().lstrip("-* ").strip())
    if not items:
        return "My working memory about you is empty."
    return f"From my working memory: {'; '.join(items)}."
