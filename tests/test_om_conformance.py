"""Observational Memory against Mastra's real engine: each recorded conversation
(``tests/conformance/traces``, recorded by ``make conformance`` from ``@mastra/memory``
1.31.0) is played on our gateway with the same scripted models and clock, and must match
the recording in at least the share of checks committed in ``tests/conformance/floors.json``.

The floors are a ratchet: whoever makes the engine match more raises them
(``python -m tests.conformance.replay --raise-floors``); a change that matches less fails
here. ``python -m tests.conformance.replay NAME -v`` lists the checks that differ.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conformance.checks import compare, rate
from tests.conformance.replay import floor_for, load_floors, load_trace, replay, summary, trace_names

NAMES = trace_names()
RECORDER = Path(__file__).parent / "conformance" / "recorder"


def test_every_trace_has_a_floor_and_was_recorded_from_the_pinned_packages() -> None:
    assert NAMES and sorted(load_floors()) == NAMES
    pinned = json.loads((RECORDER / "package.json").read_text(encoding="utf-8"))["dependencies"]
    for name in NAMES:
        trace = load_trace(name)
        assert trace["script"]["name"] == name
        assert {package: trace["recordedWith"][package] for package in ("@mastra/memory", "@mastra/core",
                                                                       "@mastra/libsql")} == \
            {package: pinned[package] for package in ("@mastra/memory", "@mastra/core", "@mastra/libsql")}


@pytest.mark.parametrize("name", NAMES)
def test_a_trace_compared_with_itself_matches_in_every_check(name: str) -> None:
    trace = load_trace(name)
    checks = compare(trace, trace)
    assert len(checks) > 10 * len(trace["turns"]) and rate(checks) == 1.0


@pytest.mark.parametrize("name", NAMES)
def test_our_engine_matches_the_recording_at_least_as_well_as_its_floor(name: str, tmp_path: Path) -> None:
    result = replay(name, tmp_path)
    floor = load_floors()[name]
    assert result.rate >= floor, f"below the floor of {floor:.1%}\n{summary(result)}"
    assert floor_for(result.rate) < floor + 0.05, (
        f"{name} now matches {result.rate:.1%}, well above its floor of {floor:.1%}: raise it "
        "(python -m tests.conformance.replay --raise-floors)")
