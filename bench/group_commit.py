"""The conversation store's writer alone, in one process: concurrent thread creations
(``save_thread``, what ``POST /memory/threads`` writes) with 8 and 32 in flight, each
preceded by a fixed slice of CPU on the event loop (``--request-ms``, what the HTTP side of
a request costs), on a fresh SQLite file.

Two configurations of the same store, alternated run by run: as shipped (group commit,
checkpoints on their own thread) and the baseline, what every write did before (one
transaction per write, SQLite's own checkpoints on the writer:
``LibSQLStore(max_group=1, checkpoint_after_s=None)``). Per configuration: writes/s, the
p50 and p99 of one write's wait, the writes per transaction and the CPU per write (the
store's own: the request slices left out); medians over ``--runs``,
with the median of each run's ratio (the two measured back to back).

Run: .venv/bin/python bench/group_commit.py [--runs N] [--writes N] [--request-ms MS] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import machine  # noqa: E402
from dev_server.kernel.messages import Thread  # noqa: E402
from dev_server.storage.conversations import ConversationStore  # noqa: E402
from dev_server.storage.libsql import LibSQLStore  # noqa: E402

CONFIGS: dict[str, dict[str, Any]] = {"as shipped": {}, "baseline": {"max_group": 1, "checkpoint_after_s": None}}


def spin(ms: float) -> float:
    """Busy for ``ms`` of wall time; the CPU seconds that took."""
    cpu, end = time.thread_time(), time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass
    return time.thread_time() - cpu


async def one_run(root: Path, options: dict[str, Any], writes: int, in_flight: int,
                  request_ms: float) -> tuple[float, float, float, float, float]:
    """writes/s, p50 and p99 of a write's wait in ms, writes per transaction, and the
    process's CPU per write in µs (every thread: the loop's, the writer's), the loop's slices
    of request CPU left out."""
    db = LibSQLStore(f"file:{root / f'{time.monotonic_ns()}.db'}", **options)
    await db.open()
    store = ConversationStore(db)
    waits: list[float] = []
    spun = 0.0  # CPU seconds of the request slices

    async def client(first: int) -> None:
        nonlocal spun
        for i in range(first, writes, in_flight):
            spun += spin(request_ms)
            started = time.perf_counter()
            await store.save_thread(Thread(f"t{i}", "bench", f"title {i}"))
            waits.append(time.perf_counter() - started)

    before = db.health()["writes"]
    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(client(c) for c in range(in_flight)))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    after = db.health()["writes"]
    await db.close()
    waits.sort()
    per_transaction = (after["writes"] - before["writes"]) / max(1, after["transactions"] - before["transactions"])
    return (writes / elapsed, waits[len(waits) // 2] * 1000, waits[int(len(waits) * 0.99)] * 1000,
            per_transaction, (cpu - spun) / writes * 1e6)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--request-ms", type=float, default=0.3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines, _ = await compare(args.runs, args.writes, args.request_ms)
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


async def compare(runs: int, writes: int, request_ms: float, in_flights: tuple[int, ...] = (8, 32)
                  ) -> tuple[list[str], dict[int, dict[str, list[tuple[float, ...]]]]]:
    """The table's lines, and per in-flight count each configuration's figures per run
    (writes/s, p50 wait ms, p99 wait ms, writes per transaction, CPU µs per write)."""
    found: dict[int, dict[str, list[tuple[float, ...]]]] = {}
    load_before = os.getloadavg()
    lines = [*(f"- {line}" for line in machine()), ""]
    with tempfile.TemporaryDirectory() as tmp:
        for in_flight in in_flights:
            figures: dict[str, list[tuple[float, ...]]] = {name: [] for name in CONFIGS}
            found[in_flight] = figures
            for run in range(runs):
                names = list(CONFIGS) if run % 2 == 0 else list(reversed(CONFIGS))
                for name in names:
                    figures[name].append(await one_run(Path(tmp), CONFIGS[name], writes, in_flight,
                                                       request_ms))
            lines += [f"{in_flight} in flight, {writes} thread creations a run, {request_ms} ms of loop"
                      " CPU before each:", "",
                      "| figure | as shipped | baseline | ratio of medians | median of each run's ratio |",
                      "|---|---|---|---|---|"]
            for index, label in enumerate(("writes/s", "p50 wait, ms", "p99 wait, ms", "writes per transaction",
                                           "CPU per write (all threads, the request slices left out), µs")):
                ours = [f[index] for f in figures["as shipped"]]
                base = [f[index] for f in figures["baseline"]]
                paired = statistics.median(a / b for a, b in zip(ours, base, strict=True))
                lines.append(f"| {label} | {statistics.median(ours):.2f} | {statistics.median(base):.2f}"
                             f" | {statistics.median(ours) / statistics.median(base):.2f} | {paired:.2f} |")
            lines.append("")
    load_after = os.getloadavg()
    lines.append(f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; {runs} runs each")
    return lines, found


if __name__ == "__main__":
    asyncio.run(main())
