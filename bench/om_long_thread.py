"""Does a turn with Observational Memory stay as cheap on a long thread as on a fresh one (issue 31)?

chat-agent's memory as the gateway builds it (``Settings``: OM on at its defaults, or off),
its turns driven in-process on a real SQLite file by ``bench.om_harness.TurnBench``, the
built-in local model answering as actor, observer and reflector. Three figures:

1. **Window size**: one thread, ``TURNS`` turns at ``messageTokens`` 30,000 and 100,000; the
   last/first ratio is the median time excluding model time of the last 10 turns over the
   first 10's (target ≤ 1.2).
2. **Imported threads**: 10,000 and 100,000 messages saved as the Studio's ``save-messages``
   saves them (``ConversationStore.save_messages``), then turns: the first turn's wall time
   and observer calls, the catch-up (turns until the window is under the threshold and
   nothing waits to be observed, at most ``CATCH_UP`` turns), then CPU per turn, OM on
   against OM off on a thread imported alike (target ≤ 1.5x).
3. **Fresh thread**: CPU per turn, OM on against OM off (target ≤ 1.5x).

CPU per turn is the process's CPU time over a block of turns, the background work they
started (buffered observations, reflections) included, divided by the turns; OM on and OM
off run side by side in the process, three blocks each taking turns, and each figure is the
median of its three.
Results are printed and written to bench/results/<date>-<commit>-om-long-thread[-quick].md.
Run: .venv/bin/python bench/om_long_thread.py [--quick]
(quick: 150 turns per window size, the 10,000-message import only, 100-turn CPU blocks; else 300.)
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.om_harness import TurnBench, Watch  # noqa: E402
from bench.report import commit, machine  # noqa: E402
from dev_server.settings import Settings  # noqa: E402

WINDOW = 10
CATCH_UP = 60
WINDOW_SIZES = (30_000, 100_000)
BLOCKS = 3  # CPU blocks per side, OM on and off taking turns (``interleaved``)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


async def window_size(message_tokens: int, turns: int, watch: Watch) -> dict[str, Any]:
    async with TurnBench(Settings(om_message_tokens=message_tokens), watch) as bench:
        thread = bench.new_thread()
        rows = [await bench.turn(thread, index) for index in range(1, turns + 1)]
    first, last = median([r["cpu_own"] for r in rows[:WINDOW]]), median([r["cpu_own"] for r in rows[-WINDOW:]])
    wall = median([r["own"] for r in rows[-WINDOW:]]) / median([r["own"] for r in rows[:WINDOW]])
    return {"tokens": message_tokens, "turns": turns, "first": first, "last": last, "ratio": last / first, "wall": wall,
            "pending_end": rows[-1].get("pending", 0), "cpu": sum(r["cpu_memory"] for r in rows) / turns,
            "om_turns": sum(1 for r in rows if r["om_calls"])}


async def imported(size: int, block: int, watch: Watch) -> dict[str, Any]:
    found: dict[str, Any] = {"size": size}
    async with TurnBench(Settings(), watch) as on, TurnBench(Settings(om_enabled=False), watch) as off:
        thread = on.new_thread()
        started = time.perf_counter()
        await on.import_messages(thread, size)
        found["import_s"] = time.perf_counter() - started
        first = await on.turn(thread, 1)
        found.update(first_s=first["total"], first_model_s=first["model"], first_om_calls=first["om_calls"],
                     first_pending=first.get("pending", 0))
        threshold = on.agent.memory.options.om.message_threshold(0)
        index, slowest = 1, 0.0
        while index < CATCH_UP:
            index += 1
            row = await on.turn(thread, index)
            slowest = max(slowest, row["total"])
            await on.settle()
            if row.get("pending", 0) < threshold:
                break
        found.update(catch_up_turns=index - 1, catch_up_slowest_s=slowest, pending_after=row.get("pending", 0))
        off_thread = off.new_thread()
        await off.import_messages(off_thread, size)
        await off.turn(off_thread, 1)
        found["on"], found["off"] = await interleaved(on_thread_blocks(on, thread, index + 1, block),
                                                      on_thread_blocks(off, off_thread, 2, block))
    return found


async def fresh(block: int, watch: Watch) -> dict[str, tuple[float, ...]]:
    async with TurnBench(Settings(), watch) as on, TurnBench(Settings(om_enabled=False), watch) as off:
        found = await interleaved(fresh_thread_blocks(on, block), fresh_thread_blocks(off, block))
    return {"on": found[0], "off": found[1]}


Block = Callable[[], Awaitable[tuple[float, ...]]]


def on_thread_blocks(bench: TurnBench, thread: str, first_index: int, block: int) -> Block:
    """Blocks of ``block`` turns one after another on ``thread``, from turn ``first_index``."""
    next_turn = first_index

    async def run() -> tuple[float, ...]:
        nonlocal next_turn
        start, next_turn = next_turn, next_turn + block
        return await bench.cpu_per_turn(thread, block, start)
    return run


def fresh_thread_blocks(bench: TurnBench, block: int) -> Block:
    """Each block on a thread of its own: its first ``block`` turns after the first."""
    async def run() -> tuple[float, ...]:
        thread = bench.new_thread()
        await bench.turn(thread, 1)
        return await bench.cpu_per_turn(thread, block, 2)
    return run


async def interleaved(on: Block, off: Block) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """CPU per turn (``TurnBench.cpu_per_turn``) of OM on and of OM off, ``BLOCKS`` blocks each
    taking turns, each figure the median of its blocks: what the machine does meanwhile (a
    slow minute, another process) falls on both alike, not on one run."""
    runs: tuple[list[tuple[float, ...]], list[tuple[float, ...]]] = ([], [])
    for _ in range(BLOCKS):
        for side, block in zip(runs, (on, off), strict=True):
            side.append(await block())
    return medians(runs[0]), medians(runs[1])


def medians(blocks: list[tuple[float, ...]]) -> tuple[float, ...]:
    return tuple(median([b[k] for b in blocks]) for k in range(len(blocks[0])))


def cpu_cells(on: tuple[float, ...], off: tuple[float, ...]) -> str:
    """CPU per turn without the actor's model calls (the target's measure), with them, and
    without any model call (the observer's and reflector's too)."""
    return " | ".join(f"{on[k] * 1000:.2f} | {off[k] * 1000:.2f} | {on[k] / off[k]:.2f}x" for k in (1, 0, 2))


def report(quick: bool, windows: list[dict[str, Any]], imports: list[dict[str, Any]],
           new: dict[str, tuple[float, ...]],
           load: tuple[float, ...], watch: Watch) -> str:
    def verdict(ok: bool) -> str:
        return "ok" if ok else "**missed**"

    lines = [
        f"# bench/om_long_thread.py{' --quick' if quick else ''}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "", *(f"- {line}" for line in machine()),
        f"- load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, at end "
        + " ".join(f"{v:.2f}" for v in os.getloadavg()),
        "- chat-agent, OM at its defaults unless said; local model as actor, observer and reflector; in-process turns",
        "", "## Window size: last/first over one thread (median CPU time excl. model calls, 10 turns each)", "",
        "- CPU time, not wall time: the process's CPU time is what the turn costs whatever else the machine runs; "
        "the wall-time ratio (the same medians of wall time excl. model) is shown beside it", "",
        "| messageTokens | turns | first 10 ms | last 10 ms | last/first | wall last/first | "
        "CPU/turn ms (excl. actor) | pending at end | turns running the observer | target ≤ 1.2 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        *(f"| {w['tokens']:,} | {w['turns']} | {w['first'] * 1000:.2f} | {w['last'] * 1000:.2f} | "
          f"{w['ratio']:.2f}x | {w['wall']:.2f}x | {w['cpu'] * 1000:.2f} | {w['pending_end']:,} | {w['om_turns']} | "
          f"{verdict(w['ratio'] <= 1.2)} |" for w in windows),
        "", "## Imported threads (save-messages), then turns", "",
        "| messages | import s | first turn s | of it model s | observer calls on turn 1 | pending after turn 1 | "
        "catch-up turns | slowest catch-up turn s | pending after |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(f"| {i['size']:,} | {i['import_s']:.1f} | {i['first_s']:.2f} | {i['first_model_s']:.2f} | "
          f"{i['first_om_calls']} | {i['first_pending']:,} | {i['catch_up_turns']} | {i['catch_up_slowest_s']:.2f} | "
          f"{i['pending_after']:,} |" for i in imports),
        "", "## CPU per turn, OM on against OM off (ms; background work included; target ≤ 1.5x excl. actor)", "",
        "- excl. actor: without the time inside the actor's model calls (the local model's cost grows with the "
        "context it is given, and OM's window is larger than the history window by design)",
        "- excl. models: without any model call's time, the local observer's and reflector's too (what the "
        "comparison with instant mock models measures: OM's own work)", "",
        "| thread | on, excl. actor | off, excl. actor | on/off | on, all | off, all | on/off, all | "
        "on, excl. models | off, excl. models | on/off, excl. models | target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        f"| fresh | {cpu_cells(new['on'], new['off'])} | {verdict(new['on'][1] / new['off'][1] <= 1.5)} |",
        *(f"| imported {i['size']:,} | {cpu_cells(i['on'], i['off'])} | {verdict(i['on'][1] / i['off'][1] <= 1.5)} |"
          for i in imports),
        "- warnings/errors logged: " + ("; ".join(f"{t} (x{n})" for t, n in watch.seen.most_common(6)) or "none"),
    ]
    return "\n".join(lines) + "\n"


async def measure(quick: bool, watch: Watch, sizes: tuple[int, int, tuple[int, ...]] | None = None
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, tuple[float, ...]],
                             tuple[float, ...]]:
    """Each window size's figures, each imported thread's, the fresh thread's CPU per turn (on,
    off), and the load average at the start. ``sizes``: turns per window size, turns per CPU
    block and the imported threads' sizes, instead of the mode's."""
    load = os.getloadavg()
    # a CPU block spans several buffering intervals of the imported thread (one every ~70 turns
    # here), so what it amortises is what a thread pays in the long run
    turns, block, import_sizes = sizes or ((150, 100, (10_000,)) if quick else (600, 300, (10_000, 100_000)))
    windows = []
    for tokens in WINDOW_SIZES:
        windows.append(await window_size(tokens, turns, watch))
        print(f"  messageTokens {tokens:,}: last/first {windows[-1]['ratio']:.2f}x", flush=True)
    imports = []
    for size in import_sizes:
        imports.append(await imported(size, block, watch))
        print(f"  imported {size:,}: first turn {imports[-1]['first_s']:.2f} s, on/off "
              f"{imports[-1]['on'][1] / imports[-1]['off'][1]:.2f}x", flush=True)
    new = await fresh(block, watch)
    return windows, imports, new, load


def watching() -> Watch:
    """A Watch on the root logger and the garbage collector, as the runs need it."""
    watch = Watch()
    logging.getLogger().addHandler(watch)
    gc.callbacks.append(watch.gc_event)
    return watch


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    at_start, watch = commit(), watching()
    windows, imports, new, load = asyncio.run(measure(quick, watch))
    text = report(quick, windows, imports, new, load, watch)
    if commit() != at_start:
        text += f"\nNote: the checkout changed during the run (commit {at_start} at start).\n"
    print(text)
    out = REPO / "bench" / "results" / (f"{time.strftime('%Y-%m-%d', time.gmtime())}-{at_start}-om-long-thread"
                                        f"{'-quick' if quick else ''}.md")
    out.write_text(text)
    print(f"written to {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
