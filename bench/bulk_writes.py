"""Bulk writes through the studio: ``save-messages`` (10k messages in batches of 500, msgs/s)
and ``POST /memory/threads`` (8 clients, threads/s), plus a burst of first turns on new
threads through the gateway (p50 vs one sequential turn). The same scenarios as
``bench/workload.py``, alone, repeated ``--runs`` times; medians. Also the studio's CPU
(user+system, all its threads) per batch and per thread created: steadier than rates on a
machine shared with other work.

Two pairs of servers run side by side, each on its own data directory, and every run
measures each scenario on both, back to back (the order alternating between runs): this
checkout as configured, and a baseline: with ``--baseline PATH``, the code of another
checkout (``git worktree add /tmp/base main``: the commit before a change) with the same
settings; without it, this checkout with one transaction per write
(``DEV_SERVER_DB_WRITE_GROUP=1``: no group commit). Then their ratio, as the ratio of the
medians and as the median of each run's ratio (the two measured seconds apart: the steadier
one when other work shares the machine).

Run: .venv/bin/python bench/bulk_writes.py [--runs N] [--baseline PATH] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.load_requests import burst, create_threads, save_messages, sequential  # noqa: E402
from bench.report import machine  # noqa: E402
from bench.servers import Server, server_env  # noqa: E402
from tests.support import free_port  # noqa: E402

FIGURES = ("save-messages, 10k in batches of 500, msgs/s", "  studio CPU per batch of 500, ms",
           "POST /memory/threads, 8 clients, threads/s", "  studio CPU per thread created, ms",
           "first turn of 32 new threads at once, p50 ms", "  the same, vs one sequential turn, x")


class Pair:
    """A studio and a gateway on one data directory, running the code of ``checkout``."""

    def __init__(self, name: str, root: Path, checkout: Path, stack: ExitStack, **settings: str) -> None:
        data = root / f"data-{name.replace(' ', '-')}"
        data.mkdir()
        studio_port, gateway_port = free_port(), free_port()
        env = server_env(data, studio_port, PYTHONPATH=str(checkout), **settings)
        self.studio = Server("studio", [sys.executable, "-m", "dev_server", "studio", "--port", str(studio_port)],
                             studio_port, env, cwd=checkout)
        stack.callback(self.studio.stop)
        self.gateway = Server("gateway", [sys.executable, "-m", "dev_server", "gateway", "--port",
                                          str(gateway_port)], gateway_port, env, cwd=checkout)
        stack.callback(self.gateway.stop)
        self.figures: list[list[float]] = [[] for _ in FIGURES]

    def warm_up(self) -> None:
        self.studio.wait_ready()
        self.gateway.wait_ready()
        asyncio.run(save_messages(self.studio.url, 1_000, 500))
        create_threads(self.studio.url, 200, 8)

    def save_messages(self) -> None:
        before = self.studio.cpu_s()
        self.figures[0].append(asyncio.run(save_messages(self.studio.url, 10_000, 500)))
        self.figures[1].append((self.studio.cpu_s() - before) / 20 * 1000)

    def create_threads(self) -> None:
        before = self.studio.cpu_s()
        self.figures[2].append(create_threads(self.studio.url, 2_000, 8))
        self.figures[3].append((self.studio.cpu_s() - before) / 2_000 * 1000)

    def first_turns(self) -> None:
        one = statistics.median(sequential(self.gateway.url, None, 20))
        p50 = statistics.median(burst(self.gateway.url, 32))
        self.figures[4].append(p50)
        self.figures[5].append(p50 / one)


SCENARIOS = (Pair.save_messages, Pair.create_threads, Pair.first_turns)


def commit_of(checkout: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="a checkout whose code is the baseline")
    parser.add_argument("--out", type=Path, help="also write the table here (e.g. bench/results/...)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        ours = Pair("ours", Path(tmp), REPO, stack)
        if args.baseline:
            baseline = Pair("baseline", Path(tmp), args.baseline.resolve(), stack)
            names = ("this checkout", f"{args.baseline} ({commit_of(args.baseline)})")
        else:
            baseline = Pair("baseline", Path(tmp), REPO, stack, DEV_SERVER_DB_WRITE_GROUP="1")
            names = ("group commit", "one transaction per write")
        pairs = {"ours": ours, "baseline": baseline}
        for pair in pairs.values():
            pair.warm_up()
        load_before = os.getloadavg()
        for run in range(args.runs):
            order = list(pairs.values()) if run % 2 == 0 else list(reversed(pairs.values()))
            for scenario in SCENARIOS:  # each scenario on both paths back to back, in alternating order,
                for pair in order:  # so that neither always runs on the busier machine
                    scenario(pair)
        load_after = os.getloadavg()
    grouped, single = ours, baseline
    lines = [*(f"- {line}" for line in machine()),
             f"- load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; {args.runs} runs, medians"
             " (each run's figures after the /)", "",
             f"| figure | {names[0]} | {names[1]} | ratio of medians | median of each run's ratio |",
             "|---|---|---|---|---|"]
    for index, label in enumerate(FIGURES):
        a, b = grouped.figures[index], single.figures[index]
        ma, mb = statistics.median(a), statistics.median(b)
        paired = statistics.median(x / y for x, y in zip(a, b, strict=True))  # measured back to back
        lines.append(f"| {label.strip()} | {ma:.2f} / {', '.join(f'{v:.1f}' for v in a)}"
                     f" | {mb:.2f} / {', '.join(f'{v:.1f}' for v in b)} | {ma / mb:.2f} | {paired:.2f} |")
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
