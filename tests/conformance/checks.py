"""The comparison of two traces of one conversation, check by check.

Per turn and step (a step is one actor model call): the stream's sequence, each
``data-*`` part's data, the OM record as the step's model call begins (five field groups),
what the actor receives (context, messages, tools). Per turn: which OM model calls ran, each
observer call's transcript, each reflector call's input, the stream after the last step,
and once the turn's background work is done the record, the thread's hints and OM metadata
keys, and each stored message the turn added or changed (on either side): its parts, and
its time. A check passes when both sides hold the same value, times taken to the second
(``views.coarse``); the match rate of a conversation is the share of its checks that pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.conformance import views

MISSING = "<missing>"  # a value one side does not have (a step, a part, a call, a turn that did not run)


@dataclass(frozen=True)
class Check:
    name: str  # "t3.s0.record.tokens"
    kind: str  # what it compares, for grouping ("record.tokens", "part:data-om-status", ...)
    expected: Any  # Mastra's
    actual: Any  # ours

    @property
    def ok(self) -> bool:
        return self.expected == self.actual

    def differences(self, limit: int = 6) -> list[str]:
        found: list[str] = []
        _diff(self.expected, self.actual, "", found)
        return found[:limit] + ([f"... {len(found) - limit} more"] if len(found) > limit else [])


def _short(value: Any, width: int = 90) -> str:
    text = repr(value)
    return text if len(text) <= width else f"{text[:width - 3]}..."


def _diff(expected: Any, actual: Any, path: str, out: list[str]) -> None:
    if expected == actual:
        return
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in [*expected, *(k for k in actual if k not in expected)]:
            _diff(expected.get(key, MISSING), actual.get(key, MISSING), f"{path}.{key}" if path else str(key), out)
        return
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            out.append(f"{path or 'list'}: {len(expected)} items != {len(actual)}")
        for index, (e, a) in enumerate(zip(expected, actual, strict=False)):
            _diff(e, a, f"{path}[{index}]", out)
        return
    if isinstance(expected, str) and isinstance(actual, str):
        at = next((i for i, (x, y) in enumerate(zip(expected, actual, strict=False)) if x != y),
                  min(len(expected), len(actual)))
        out.append(f"{path or 'text'}: differs at char {at}: Mastra {_short(expected[at:at + 60])}"
                   f" / ours {_short(actual[at:at + 60])}")
        return
    out.append(f"{path or 'value'}: Mastra {_short(expected)} / ours {_short(actual)}")


def _at(items: list[Any], index: int) -> Any:
    return items[index] if index < len(items) else MISSING


class _Builder:
    def __init__(self) -> None:
        self.checks: list[Check] = []

    def add(self, name: str, kind: str, expected: Any, actual: Any) -> None:
        self.checks.append(Check(name, kind, views.coarse(expected), views.coarse(actual)))

    def parts(self, prefix: str, mastra: list[dict[str, Any]], ours: list[dict[str, Any]] | None) -> None:
        """The sequence of a group of events, then each data part paired by type and order."""
        self.add(f"{prefix}.sequence", "sequence", views.sequence(mastra),
                 views.sequence(ours) if ours is not None else MISSING)
        expected = views.data_parts(mastra)
        actual = views.data_parts(ours) if ours is not None else {}
        for kind in [*expected, *(k for k in actual if k not in expected)]:
            ours_of_kind, mastra_of_kind = actual.get(kind, []), expected.get(kind, [])
            for n in range(max(len(mastra_of_kind), len(ours_of_kind))):
                self.add(f"{prefix}.{kind}#{n}", f"part:{kind}", _at(mastra_of_kind, n), _at(ours_of_kind, n))

    def record(self, prefix: str, mastra: dict[str, Any] | None, ours: Any) -> None:
        for group in views.RECORD_GROUPS:
            self.add(f"{prefix}.{group}", f"record.{group}", views.record_group(mastra, group),
                     views.record_group(ours, group) if ours is not MISSING else MISSING)


def compare(mastra: dict[str, Any], ours: dict[str, Any]) -> list[Check]:
    """Every check of the conversation: Mastra's trace against ours (``ours["error"]``: our
    engine did not run it, and every check fails)."""
    build = _Builder()
    ours_turns = [] if ours.get("error") else ours.get("turns", [])
    m_stored: dict[str, dict[str, Any]] = {}  # every stored message as the last turn that changed it left it
    o_stored: dict[str, dict[str, Any]] = {}
    for index, turn in enumerate(mastra["turns"]):
        theirs = ours_turns[index] if index < len(ours_turns) else None
        _turn(build, f"t{index}", turn, theirs)
        m_changed = views.stored_by_id(turn["after"]["messages"])
        o_changed = views.stored_by_id(theirs["after"]["messages"]) if theirs else {}
        m_stored.update(m_changed)
        o_stored.update(o_changed)
        for label in [*m_changed, *(k for k in o_changed if k not in m_changed)]:
            m_message, o_message = m_stored.get(label), o_stored.get(label)
            build.add(f"t{index}.stored[{label}]", "stored.parts", views.stored_parts(m_message),
                      views.stored_parts(o_message) if theirs else MISSING)
            build.add(f"t{index}.stored[{label}].time", "stored.time", views.stored_time(m_message),
                      views.stored_time(o_message) if theirs else MISSING)
    return build.checks


def _turn(build: _Builder, t: str, mastra: dict[str, Any], ours: dict[str, Any] | None) -> None:
    build.add(f"{t}.error", "turn.error", mastra.get("error"), ours.get("error") if ours else MISSING)
    m_steps, m_end = views.split_steps(mastra["events"])
    o_steps, o_end = views.split_steps(ours["events"]) if ours else ([], None)
    m_calls, o_calls = mastra["steps"], ours["steps"] if ours else []
    for s in range(max(len(m_steps), len(o_steps), len(m_calls), len(o_calls))):
        prefix = f"{t}.s{s}"
        build.parts(prefix, _at(m_steps, s) if s < len(m_steps) else [], o_steps[s] if s < len(o_steps) else None)
        m_call, o_call = _at(m_calls, s), _at(o_calls, s)
        build.record(f"{prefix}.record", m_call["record"] if m_call is not MISSING else None,
                     o_call["record"] if o_call is not MISSING else MISSING)
        for kind, view in (("context", views.actor_context), ("messages", views.actor_messages)):
            build.add(f"{prefix}.actor.{kind}", f"actor.{kind}",
                      view(m_call["prompt"]) if m_call is not MISSING else MISSING,
                      view(o_call["prompt"]) if o_call is not MISSING else MISSING)
        build.add(f"{prefix}.actor.tools", "actor.tools", m_call["tools"] if m_call is not MISSING else MISSING,
                  o_call["tools"] if o_call is not MISSING else MISSING)
    build.parts(f"{t}.end", m_end, o_end)
    _calls(build, t, mastra["calls"], ours["calls"] if ours else None)
    after, ours_after = mastra["after"], ours["after"] if ours else None
    build.record(f"{t}.after.record", after["record"], ours_after["record"] if ours_after else MISSING)
    build.add(f"{t}.after.thread.hints", "thread.hints", views.thread_hints(after["thread"]),
              views.thread_hints(ours_after["thread"]) if ours_after else MISSING)
    build.add(f"{t}.after.thread.keys", "thread.keys", views.thread_keys(after["thread"]),
              views.thread_keys(ours_after["thread"]) if ours_after else MISSING)


def _calls(build: _Builder, t: str, mastra: list[dict[str, Any]], ours: list[dict[str, Any]] | None) -> None:
    """Which OM model calls the turn made, then each observer's and reflector's input."""
    build.add(f"{t}.calls", "calls", [c["purpose"] for c in mastra],
              [c["purpose"] for c in ours] if ours is not None else MISSING)
    for purpose, view in (("observer", views.observer_transcript), ("reflector", views.reflector_input)):
        m_of = [c for c in mastra if c["purpose"] == purpose]
        o_of = [c for c in ours or [] if c["purpose"] == purpose]
        for n in range(max(len(m_of), len(o_of))):
            build.add(f"{t}.{purpose}#{n}.input", f"{purpose}.input",
                      view(m_of[n]) if n < len(m_of) else MISSING, view(o_of[n]) if n < len(o_of) else MISSING)


def rate(checks: list[Check]) -> float:
    return sum(c.ok for c in checks) / len(checks) if checks else 0.0
