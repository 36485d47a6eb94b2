"""Observation groups: which messages each piece of the log came from (docs/observational-memory.md#retrieval).

With retrieval on, what one observation cycle wrote is kept in the log as

    <observation-group id="<16 hex>" range="<first message id>:<last message id>">
    ...observations...
    </observation-group>

where the first and last messages are the observed ones with something to show (a part
that is neither ``data-*`` nor ``step-start``). The range is what the ``recall`` tool
pages from (``dev_server.om.retrieval.recall_tool``), so the actor can go back from a line of its memory to
the messages behind it.

The reflector reads the log without the tags (``dev_server.om.prompting.prompts.reflector_messages``) and
its answer is wrapped again here (``rewrap_reflection``, end of 4.4): ``## Group `id```
sections map back to the source groups they name (or share lines with) and cover their
combined range; any other answer becomes one ``kind="reflection"`` group from the first
source group's start to the last one's end. The actor sees each group as a ``## Group``
heading with its range (``render_groups_for_context``, docs/observational-memory.md#context).

Pure text work, except ``group_of_message``, which reads the range ends' positions.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from dev_server.kernel.messages import Message

__all__ = ["ObservationGroup", "aligned_cut", "cut_points", "group_of_message", "has_groups", "is_visible",
           "message_range", "new_group_id", "parse_groups", "render_groups_for_context", "rewrap_reflection",
           "strip_groups", "wrap_group"]

_GROUP = re.compile(r"<observation-group(\s[^>]*)?>([\s\S]*?)</observation-group>")
_ATTRIBUTE = re.compile(r'([\w][\w-]*)="([^"]*)"')
_SECTION_HEADING = re.compile(r"^##[ \t]+Group[ \t]+", re.M)
_SECTION_META = re.compile(r"^_(?:range|kind):[^\n]*_[ \t]*$\n?", re.M)
_BACKTICKED = re.compile(r"`([^`]+)`")
_BLANK_LINES = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class ObservationGroup:
    id: str
    range: str
    content: str
    kind: str | None = None

    @property
    def start(self) -> str:
        return self.range.split(",")[0].split(":")[0].strip()

    @property
    def end(self) -> str:
        return self.range.split(",")[-1].split(":")[-1].strip()


def new_group_id() -> str:
    return secrets.token_hex(8)


def is_visible(message: Message) -> bool:
    """A message with something to show: a part that is neither ``data-*`` nor ``step-start``
    (or, without parts, a text content)."""
    parts = message.content.get("parts") if isinstance(message.content, dict) else None
    if not parts:
        text = message.content.get("content") if isinstance(message.content, dict) else message.content
        return isinstance(text, str) and bool(text)
    return any(isinstance(p, dict) and not str(p.get("type", "")).startswith("data-")
               and p.get("type") != "step-start" for p in parts)


def message_range(messages: Sequence[Message]) -> str:
    """``first:last`` of the visible messages (of all of them when none is visible)."""
    ordered = sorted(messages, key=lambda m: (m.created_at, m.seq or 0))
    shown = [m for m in ordered if is_visible(m)] or ordered
    return f"{shown[0].id}:{shown[-1].id}" if shown else ""


def wrap_group(observations: str, range_: str, *, group_id: str | None = None, kind: str | None = None) -> str:
    kind_attribute = f' kind="{kind}"' if kind else ""
    return (f'<observation-group id="{group_id or new_group_id()}" range="{range_}"{kind_attribute}>\n'
            f"{observations.strip()}\n</observation-group>")


def parse_groups(text: str) -> list[ObservationGroup]:
    """The groups of ``text`` in order; a tag without an id or a range is not one."""
    groups = []
    for match in _GROUP.finditer(text or ""):
        attributes = dict(_ATTRIBUTE.findall(match.group(1) or ""))
        if attributes.get("id") and attributes.get("range"):
            groups.append(ObservationGroup(attributes["id"], attributes["range"], match.group(2).strip(),
                                           attributes.get("kind")))
    return groups


def has_groups(text: str) -> bool:
    return bool(parse_groups(text))


def strip_groups(text: str) -> str:
    """``text`` with every group tag replaced by its content."""
    return _BLANK_LINES.sub("\n\n", _GROUP.sub(lambda m: m.group(2).strip(), text or "")).strip()


def render_groups_for_context(text: str) -> str:
    """The log as the actor reads it (docs/observational-memory.md#context): each group as a
    ``## Group `id``` heading, its
    ``_range: `start:end`_`` line and its content; text outside groups as it is."""
    def render(match: re.Match[str]) -> str:
        attributes = dict(_ATTRIBUTE.findall(match.group(1) or ""))
        content = match.group(2).strip()
        if not attributes.get("id") or not attributes.get("range"):
            return content
        return f"## Group `{attributes['id']}`\n_range: `{attributes['range']}`_\n\n{content}"

    return _BLANK_LINES.sub("\n\n", _GROUP.sub(render, text or "")).strip()


def combined_range(groups: Sequence[ObservationGroup]) -> str:
    """From the first group's start to the last group's end (groups in log order)."""
    return f"{groups[0].start}:{groups[-1].end}" if groups else ""


def _lines(text: str) -> set[str]:
    return {line.strip() for line in text.split("\n") if line.strip()}


def rewrap_reflection(reflection: str, source: str) -> str:
    """The reflector's answer wrapped in groups again (4.4). ``source`` is the log it read,
    with its groups; without any the answer is returned as it is."""
    sources = parse_groups(source)
    reflection = reflection.strip()
    if not sources or not reflection:
        return reflection
    if not _SECTION_HEADING.search(reflection):
        return wrap_group(reflection, combined_range(sources), kind="reflection")
    by_id = {group.id: group for group in sources}
    wrapped = []
    sections = [s.strip() for s in _SECTION_HEADING.split(reflection) if s.strip()]
    for index, section in enumerate(sections):
        heading, _, body = section.partition("\n")
        named = _BACKTICKED.search(heading)
        heading_id = (named.group(1) if named else heading.split()[0] if heading.split() else "").strip()
        body = _SECTION_META.sub("", body).strip() if named or heading_id in by_id else section
        if not body:
            continue
        if heading_id in by_id:
            matched = [by_id[heading_id]]
        else:
            shared = _lines(body)
            matched = [g for g in sources if _lines(g.content) & shared] or [sources[min(index, len(sources) - 1)]]
        group_id = heading_id if heading_id in by_id else new_group_id()
        wrapped.append(wrap_group(body, combined_range(matched), group_id=group_id, kind="reflection"))
    return "\n\n".join(wrapped)


def cut_points(lines: Sequence[str]) -> list[int]:
    """Line counts at which the log can be cut without splitting a group (a buffered
    reflection takes the first N lines of the log)."""
    points, depth = [], 0
    for index, line in enumerate(lines):
        if depth == 0:
            points.append(index)
        depth += line.count("<observation-group") - line.count("</observation-group>")
        depth = max(depth, 0)
    if depth == 0:
        points.append(len(lines))
    return points


def aligned_cut(lines: Sequence[str], count: int) -> int:
    """``count`` moved to a cut point: the last one in (0, count], else the first after it."""
    points = cut_points(lines)
    return max((p for p in points if 0 < p <= count), default=min((p for p in points if p > count), default=count))


Resolve = Callable[[str], Awaitable[Message | None]]


async def group_of_message(groups: Sequence[ObservationGroup], message: Message,
                           resolve: Resolve) -> ObservationGroup | None:
    """The last group whose range holds ``message``: between the range's ends by (time,
    insertion order), in the same thread when both ends are in one thread. ``resolve``
    reads a message by id (callers cache it: one log names each end again and again)."""
    position = (message.created_at, message.seq or 0)
    for group in reversed(groups):
        start, end = await resolve(group.start), await resolve(group.end)
        if start is None or end is None:
            continue
        if start.thread_id == end.thread_id != message.thread_id:
            continue
        if (start.created_at, start.seq or 0) <= position <= (end.created_at, end.seq or 0):
            return group
    return None
