"""The conformance report: each recorded conversation played on our gateway and compared
with Mastra's trace (docs/om-conformance.md).

    python -m tests.conformance.replay                  every conversation: rates, differing checks by kind
    python -m tests.conformance.replay sync-only -v     one conversation, each differing check with its diff
    python -m tests.conformance.replay --raise-floors   write the rates that went up into floors.json

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

HERE = Path(__file__).parent
TRACES = HERE / "traces"
FLOORS = HERE / "floors.json"


def trace_names() -> list[str]:
    return sorted(path.stem for path in TRACES.glob("*.json"))


def load_trace(name: str) -> dict[str, Any]:
    return json.loads((TRACES / f"{name}.json").read_text(encoding="utf-8"))


def load_floors() -> dict[str, float]:
    return json.loads(FLOORS.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Result:
    name: str
    checks: list[Check]
    error: str | None  # our engine did not run the conversation

    @property
    def rate(self) -> float:
        return rate(self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]


def replay(name: str, workdir: Path) -> Result:
    """Conversation ``name`` on our gateway (data in ``workdir``), compared with its trace."""
    trace = load_trace(name)
    ours = play(trace["script"], workdir / name)
    return Result(name, compare(trace, ours), ours.get("error"))


def summary(result: Result, *, verbose: bool = False, limit: int = 4) -> str:
    """The conversation's rate, then its differing checks by kind (with ``verbose``, each one's diff)."""
    lines = [f"{result.name}: {result.rate:.1%} ({len(result.checks) - len(result.failed)}/{len(result.checks)}"
             " checks match)"]
    if result.error:
        lines.append(f"  not run: {result.error}")
        return "\n".join(lines)
    by_kind: dict[str, list[Check]] = {}
    for check in result.failed:
        by_kind.setdefault(check.kind, []).append(check)
    totals = Counter(c.kind for c in result.checks)
    for kind, failed in sorted(by_kind.items(), key=lambda item: -len(item[1])):
        names = ", ".join(c.name for c in failed[:limit]) + (" ..." if len(failed) > limit else "")
        lines.append(f"  {kind}: {len(failed)}/{totals[kind]} differ ({names})")
        if verbose:
            for check in failed:
                lines.append(f"    {check.name}")
                lines.extend(f"      {d}" for d in check.differences())
    return "\n".join(lines)


# Below a measured rate by this much: the replay is deterministic (the actor's reply ends once
# background work is done), the margin is for a race that it does not rule out.
MARGIN = 0.005


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
    print("\nconversation            rate    floor")
    below = []
    for result in results:
        floor = floors.get(result.name, 0.0)
        mark = "  BELOW THE FLOOR" if result.rate < floor else ""
        print(f"{result.name:<22} {result.rate:6.1%}  {floor:6.1%}{mark}")
        below += [result.name] if mark else []
    if args.raise_floors:
        raised = {r.name: round(floor_for(r.rate), 3) for r in results
                  if r.name not in floors or floor_for(r.rate) > floors[r.name]}
        if raised:
            FLOORS.write_text(json.dumps({**floors, **raised}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            print(f"raised: {', '.join(f'{k} {v:.1%}' for k, v in sorted(raised.items()))}")
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
