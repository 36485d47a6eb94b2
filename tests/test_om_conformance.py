"""Observational Memory against Mastra's real engine: each recorded conversation
(``tests/conformance/traces``, recorded by ``make conformance`` from ``@mastra/memory``
1.31.0) is played on our gateway with the same scripted models and clock, and must match
the recording in at least the share of checks committed in ``tests/conformance/floors.json``.

Each conversation has two floors: the free run's (every check counts) and the re-seeded
run's (the checks ``declared.json`` explains by a declared difference set aside, our record
made Mastra's again after a difference that diverges the state; docs/om-conformance.md).
The floors are a ratchet: whoever makes the engine match more raises them
(``python -m tests.conformance.replay --raise-floors``); a change that matches less fails
here. ``python -m tests.conformance.replay NAME -v`` lists the checks that differ.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from dev_server.kernel import ids
from tests.conformance.checks import compare, rate
from tests.conformance.ids import steady_uuids
from tests.conformance.replay import floor_for, load_declared, load_floors, load_trace, replay, summary, trace_names

NAMES = trace_names()
RECORDER = Path(__file__).parent / "conformance" / "recorder"
DIFFERENCES = Path(__file__).parent.parent / "docs" / "observational-memory.md"


def test_every_trace_has_a_floor_and_was_recorded_from_the_pinned_packages() -> None:
    assert NAMES and sorted(load_floors()) == NAMES
    pinned = json.loads((RECORDER / "package.json").read_text(encoding="utf-8"))["dependencies"]
    for name in NAMES:
        trace = load_trace(name)
        assert trace["script"]["name"] == name
        assert {package: trace["recordedWith"][package] for package in ("@mastra/memory", "@mastra/core",
                                                                       "@mastra/libsql")} == \
            {package: pinned[package] for package in ("@mastra/memory", "@mastra/core", "@mastra/libsql")}


def test_every_declared_check_exists_and_names_a_declared_difference() -> None:
    declared = load_declared()
    assert set(declared) <= set(NAMES)
    differences = DIFFERENCES.read_text(encoding="utf-8")
    for name, declarations in declared.items():
        trace = load_trace(name)
        names = {check.name for check in compare(trace, trace)}
        # a stored message our side changed in a turn where Mastra's did not is checked there too
        labels = {message["id"] for turn in trace["turns"] for message in turn["after"]["messages"]}
        names |= {f"t{n}.stored[{label}]" for n in range(len(trace["turns"])) for label in labels}
        for declaration in declarations:
            assert f"| {declaration['difference']} |" in differences, declaration["difference"]
            assert declaration["checks"] and set(declaration["checks"]) <= names, declaration
            assert 0 <= declaration.get("reseed", 0) < len(trace["turns"])


@pytest.mark.parametrize("name", NAMES)
def test_a_trace_compared_with_itself_matches_in_every_check(name: str) -> None:
    trace = load_trace(name)
    checks = compare(trace, trace)
    assert len(checks) > 10 * len(trace["turns"]) and rate(checks) == 1.0


@pytest.mark.parametrize("name", NAMES)
def test_our_engine_matches_the_recording_at_least_as_well_as_its_floor(name: str, tmp_path: Path) -> None:
    result = replay(name, tmp_path)
    floors = load_floors()[name]
    for run, measured in (("free", result.rate), ("reseeded", result.reseeded_rate)):
        floor = floors[run]
        assert measured >= floor, f"{run}: below the floor of {floor:.1%}\n{summary(result)}"
        assert floor_for(measured) < floor + 0.05, (
            f"{name} ({run}) now matches {measured:.1%}, well above its floor of {floor:.1%}: raise it "
            "(python -m tests.conformance.replay --raise-floors)")


def test_the_replay_draws_every_id_the_gateway_makes_from_its_seeded_sequence() -> None:
    """An id priced differently by tokenx (a real UUID may have an all-digit segment, one
    token) moved a count by one in a replay now and then: every id source is seeded."""

    def draws() -> list[uuid.UUID]:
        with steady_uuids("retrieval"):
            return [ids.uuid4(), uuid.uuid4(), ids.uuid4()]

    first = draws()
    assert first == draws()
    assert all(b >= 0xA0 for u in first for i, b in enumerate(u.bytes) if i not in (6, 8))
