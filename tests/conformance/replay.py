"""The conformance report: each recorded conversation played on our gateway and compared
with Mastra's trace (docs/om-conformance.md).

    python -m tests.conformance.replay                  every conversation: rates, differing checks by kind
    python -m tests.conformance.replay sync-only -v     one conversation, each differing check with its diff
    python -m tests.conformance.replay --raise-floors   write the rates that went up into floors.json

Each conversation has two rates. *Free*: our engine runs the whole conversation on its own
and every check counts. *Re-seeded*: the checks ``declared.json`` lists (each with the
declared difference, docs/observational-memory.md, that explains it) are set aside when they
differ, and where a declared difference made the records diverge our record is re-seeded
from Mastra's at the end of that turn (``tests.conformance.reseed``), so the later turns
measure decisions rather than the divergence's consequences. Declared checks are counted and
shown, never dropped silently.

Run it from the repository root with the project's Python (no Node needed).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conformance.checks import Check, compare, rate
from tests.conformance.gateway_run import play
from tests.conformance.reseed import stored_times

HERE = Path(__file__).parent
TRACES = HERE / "traces"
FLOORS = HERE / "floors.json"
DECLARED = HERE / "declared.json"


def trace_names() -> list[str]:
    return sorted(path.stem for path in TRACES.glob("*.json"))


def load_trace(name: str) -> dict[str, Any]:
    return json.loads((TRACES / f"{name}.json").read_text(encoding="utf-8"))


def load_floors() -> dict[str, dict[str, float]]:
    """Per conversation, the floor of its ``free`` and of its ``reseeded`` rate."""
    return json.loads(FLOORS.read_text(encoding="utf-8"))


def load_declared() -> dict[str, list[dict[str, Any]]]:
    """Per conversation, its declarations: ``{"difference": "D38", "checks": [names],
    "reseed": turn}`` (``reseed``, optional: the turn after which our record is made Mastra's)."""
    return json.loads(DECLARED.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Result:
    name: str
    checks: list[Check]  # the free run's
    error: str | None  # our engine did not run the conversation
    reseeded_checks: list[Check] | None = None  # the re-seeded run's (None: nothing to re-seed, the free run's)
    declared: dict[str, str] | None = None  # check name -> the declared difference that explains it

    @property
    def rate(self) -> float:
        return rate(self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def measured(self) -> list[Check]:
        """The re-seeded run's checks less the declared ones that differ."""
        declared = self.declared or {}
        return [c for c in self.reseeded_checks or self.checks if c.ok or c.name not in declared]

    @property
    def set_aside(self) -> list[Check]:
        """The declared checks that differ in the re-seeded run."""
        declared = self.declared or {}
        return [c for c in self.reseeded_checks or self.checks if not c.ok and c.name in declared]

    @property
    def reseeded_rate(self) -> float:
        return rate(self.measured)


def replay(name: str, workdir: Path) -> Result:
    """Conversation ``name`` on our gateway (data in ``workdir``), compared with its trace:
    the free run, then the re-seeded one when a declaration asks for it."""
    trace = load_trace(name)
    ours = play(trace["script"], workdir / name)
    declarations = load_declared().get(name, [])
    declared = {check: d["difference"] for d in declarations for check in d["checks"]}
    reseed = {d["reseed"]: trace["turns"][d["reseed"]]["after"]["record"] for d in declarations if "reseed" in d}
    reseeded = None
    if reseed and not ours.get("error"):
        reseeded = compare(trace, play(trace["script"], workdir / f"{name}-reseeded", reseed,
                                       stored_times(trace["turns"])))
    return Result(name, compare(trace, ours), ours.get("error"), reseeded, declared)


def summary(result: Result, *, verbose: bool = False, limit: int = 4) -> str:
    """The conversation's rates, then the re-seeded run's differing checks by kind (with
    ``verbose``, each one's diff), then the declared checks set aside."""
    checks = result.reseeded_checks or result.checks
    failed = [c for c in result.measured if not c.ok]
    lines = [f"{result.name}: free {result.rate:.1%} ({len(result.checks) - len(result.failed)}/"
             f"{len(result.checks)} checks match), re-seeded {result.reseeded_rate:.1%} "
             f"({len(result.measured) - len(failed)}/{len(result.measured)}, {len(result.set_aside)} declared)"]
    if result.error:
        lines.append(f"  not run: {result.error}")
        return "\n".join(lines)
    by_kind: dict[str, list[Check]] = {}
    for check in failed:
        by_kind.setdefault(check.kind, []).append(check)
    totals = Counter(c.kind for c in checks)
    for kind, differing in sorted(by_kind.items(), key=lambda item: -len(item[1])):
        names = ", ".join(c.name for c in differing[:limit]) + (" ..." if len(differing) > limit else "")
        lines.append(f"  {kind}: {len(differing)}/{totals[kind]} differ ({names})")
        if verbose:
            for check in differing:
                lines.append(f"    {check.name}")
                lines.extend(f"      {d}" for d in check.differences())
    by_difference = Counter((result.declared or {})[c.name] for c in result.set_aside)
    if by_difference:
        lines.append("  declared: " + ", ".join(f"{d} {n}" for d, n in sorted(by_difference.items())))
        if verbose:
            for check in result.set_aside:
                lines.append(f"    {check.name} ({(result.declared or {})[check.name]})")
                lines.extend(f"      {d}" for d in check.differences())
    return "\n".join(lines)


# Below a measured rate by this much: the replay is deterministic (the actor's reply ends once
# background work is done; every id is drawn from the seeded sequence), the margin is for a
# race that it does not rule out (seen once in tool-steps on a loaded machine: a buffering's
# end stored on the next reply, 2 checks of 366).
MARGIN = 0.01


def floor_for(value: float) -> float:
    """The floor a measured rate allows: rounded down to a tenth of a percent, less ``MARGIN``."""
    return max(0.0, math.floor(value * 1000) / 1000 - MARGIN)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance.replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="conversations (default: every trace)")
    parser.add_argument("-v", "--verbose", action="store_true", help="each differing check with its differences")
    parser.add_argument("--raise-floors", action="store_true", help="write rates above their floor into floors.json")
    args = parser.parse_args(argv)
    names = args.names or trace_names()
    unknown = [n for n in names if n not in trace_names()]
    if unknown:
        parser.error(f"no trace for {', '.join(unknown)} (have: {', '.join(trace_names())})")
    floors = load_floors()
    results = []
    with tempfile.TemporaryDirectory(prefix="om-conformance-") as work:
        for name in names:
            result = replay(name, Path(work))
            results.append(result)
            print(summary(result, verbose=args.verbose), flush=True)
    print("\nconversation            free   floor  re-seeded  floor")
    below = []
    for result in results:
        floor = floors.get(result.name, {"free": 0.0, "reseeded": 0.0})
        mark = "  BELOW THE FLOOR" if (result.rate < floor["free"] or result.reseeded_rate < floor["reseeded"]) else ""
        print(f"{result.name:<22} {result.rate:6.1%} {floor['free']:6.1%}    {result.reseeded_rate:6.1%} "
              f"{floor['reseeded']:6.1%}{mark}")
        below += [result.name] if mark else []
    if args.raise_floors:
        raised = {}
        for r in results:
            old = floors.get(r.name, {"free": 0.0, "reseeded": 0.0})
            new = {"free": max(old["free"], round(floor_for(r.rate), 3)),
                   "reseeded": max(old["reseeded"], round(floor_for(r.reseeded_rate), 3))}
            if new != old:
                raised[r.name] = new
        if raised:
            FLOORS.write_text(json.dumps({**floors, **raised}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            shown = (f"{k} {v['free']:.1%} / {v['reseeded']:.1%}" for k, v in sorted(raised.items()))
            print("raised: " + ", ".join(shown))
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
