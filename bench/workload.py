"""The whole-server workload (issue 16's table): turns, concurrency, bulk writes, reads, memory.

Our gateway and studio run as they do under ``make dev`` (two uvicorn processes sharing one
data directory, the built-in local model answering instantly, spans exported from the
gateway to the studio), so every figure is server overhead. Baseline, in the same run: the
bare server of bench/bare_server.py, which answers the same routes with our recorded bytes
(the chat body in the same chunks, the same headers; checked byte for byte at the start)
from a plain StreamingResponse, under the same uvicorn settings.

Figures (each with its ratio to the bare server where it has one):
- sequential turn p50/p99 on a fresh thread, a 1k- and a 10k-message thread (gateway
  ``POST /api/chat``, one new user message per turn, read to ``[DONE]``), and the server CPU
  per turn (user+system time of every server process) over the 10k turns;
- then two identical runs of: turns/s with 8, 32 and 128 concurrent clients (each its own
  thread), the cores used and the CPU per turn at 32; the first turn of 32 new threads sent
  at once vs one sequential turn; ``save-messages`` of 10k messages in batches of 500;
  ``POST /memory/threads`` with 8 clients; a thread list page (100 of 10k threads) and a
  messages page (40 of 11k). A figure measured in both runs is their mean (each run shown);
- RSS (as PSS, so the gateway workers' shared pages count once) of each server at start,
  after warm-up and after each run;
- the targets of issue 16 as PASS/FAIL lines (bench/report.py).

Clients are bench/load.mjs (Node), so the client is not what limits the bare server.
Results are printed and written to bench/results/<date>-<commit>.md (``--out`` elsewhere).
``--mastra`` adds a real Mastra server (bench/mastra_server.py) and, in each run, issue 31's
thread creation and burst of first turns on our studio and on it, one right after the other.
Run: ``make bench`` (``QUICK=1`` for a short run) or ``.venv/bin/python bench/workload.py
[--quick] [--turns N] [--seconds S] [--workers N] [--out PATH] [--trace-memory] [--mastra]``. Linux only
(/proc). The gateway runs as many workers as ``make dev`` would (``DEV_SERVER_WORKERS``, else
one per core); CPU and RSS are summed over each server's processes.
``--trace-memory`` runs our servers under tracemalloc (bench/traced.py: much slower, so
figures are off) and prints where memory grew between warm-up and the end of each run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import canned, mastra_server  # noqa: E402
from bench import report as targets  # noqa: E402
from bench.chat_turn import seed  # noqa: E402
from bench.load_requests import (  # noqa: E402
    AGENT,
    burst,
    chat_body,
    concurrent,
    create_threads,
    pct,
    reads,
    save_messages,
    sequential,
)
from bench.report import Report  # noqa: E402
from bench.servers import Server, cpu, server_env  # noqa: E402
from bench.versus_mastra import MASTRA_THREADS, against_mastra, warm_up  # noqa: E402
from tests.kit.local_http import background_idle  # noqa: E402
from tests.support import free_port  # noqa: E402

LIST_PATH = f"/api/memory/threads?agentId={AGENT}&resourceId=bench-list&perPage=100&page=0"
MESSAGES_PATH = f"/api/memory/threads/bench-10k/messages?agentId={AGENT}&perPage=40&page=0"
SETTLE_S = 1.5  # the gateway exports spans every 0.5 s: their cost lands in the figure it belongs to


async def seed_threads(db_path: Path, resource: str, count: int) -> None:
    from dev_server.kernel.clock import now_iso
    from dev_server.kernel.messages import Thread
    from dev_server.storage import message_writes
    from dev_server.storage.libsql import LibSQLStore

    db = LibSQLStore(f"file:{db_path}")
    await db.open()
    threads = [Thread(f"{resource}-{i:05d}", resource, agent_id=AGENT) for i in range(count)]
    await db.run_write(lambda conn: message_writes.ensure_threads(conn, threads, now_iso()))  # one transaction
    await db.close()


# -- the bare server --------------------------------------------------------------------------


def start_bare(gateway: Server, studio: Server, tmp: Path, env: dict[str, str], report: Report) -> Server:
    """Record one reply and both pages from our servers, start the bare server replaying them,
    and check that it answers byte for byte what we did."""
    chat = ("POST", "/api/chat", chat_body(str(uuid.uuid4()), "hello"))
    recorded = {"chat": canned.request(gateway.url, *chat),
                "threads": canned.request(studio.url, "GET", LIST_PATH),
                "messages": canned.request(studio.url, "GET", MESSAGES_PATH)}
    for name, raw in recorded.items():
        if raw.status != 200:
            raise RuntimeError(f"recording {name}: HTTP {raw.status} {raw.body[:300]!r}")
    path = tmp / "canned.json"
    path.write_text(json.dumps({name: raw.replayable() for name, raw in recorded.items()}))
    port = free_port()
    bare = Server("bare", [sys.executable, str(REPO / "bench" / "bare_server.py"), str(port), str(path)], port, env,
                  tmp)
    try:
        bare.wait_ready()
        replayed = {"chat": canned.request(bare.url, *chat), "threads": canned.request(bare.url, "GET", LIST_PATH),
                    "messages": canned.request(bare.url, "GET", MESSAGES_PATH)}
        for name in recorded:
            problems = canned.same(recorded[name], replayed[name])
            if problems:
                raise RuntimeError(f"the bare server's {name} response is not ours: {'; '.join(problems)}")
    except BaseException:
        bare.stop()
        raise
    chunks = recorded["chat"].chunks
    report.note(f"Bare server check: its chat reply, thread list and messages page are byte-identical to ours "
                f"(reply: {len(recorded['chat'].body)} bytes in {len(chunks)} body chunks of "
                f"{', '.join(str(len(c)) for c in chunks)} bytes; same headers).")
    return bare


# -- memory -----------------------------------------------------------------------------------


def growth(before: Path, after: Path, top: int = 12) -> list[str]:
    """The allocation sites that grew most between two tracemalloc snapshots: each site, and
    the nearest frames of our code that led to it."""
    old, new = tracemalloc.Snapshot.load(str(before)), tracemalloc.Snapshot.load(str(after))

    def where(frame: tracemalloc.Frame) -> str:
        return f"{frame.filename.split('site-packages/')[-1].removeprefix(str(REPO) + '/')}:{frame.lineno}"

    stats = new.compare_to(old, "traceback")
    lines = [f"{sum(s.size_diff for s in stats) / 2**20:+7.2f} MB in all, Python allocations still alive"]
    for stat in stats[:top]:
        frames = list(stat.traceback)  # oldest first: the allocation is the last
        ours = [where(f) for f in reversed(frames[:-1]) if f.filename.startswith(str(REPO / "dev_server"))][:3]
        lines.append(f"{stat.size_diff / 2**20:+7.2f} MB {stat.count_diff:+8d} blocks  {where(frames[-1])}"
                     + (f"  <- {' <- '.join(ours)}" if ours else ""))
    return lines


# -- the run ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (fewer turns, 1.5 s per level)")
    parser.add_argument("--turns", type=int, help="sequential turns per scenario (default 100; quick 50)")
    parser.add_argument("--seconds", type=float, help="duration of each concurrency level (default 5; quick 1.5)")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/<date>-<commit>.md)")
    parser.add_argument("--trace-memory", action="store_true", help="our servers under tracemalloc: growth sites")
    parser.add_argument("--om", action="store_true",
                        help="chat-agent with its Observational Memory, as make dev runs it (default: off, so the "
                             "figures are the step loop's, as issue 16's targets were set before OM)")
    parser.add_argument("--workers", type=int, help="gateway workers (default DEV_SERVER_WORKERS, else one per "
                                                    "core as make dev; 1 with --trace-memory)")
    parser.add_argument("--mastra", action="store_true", help="also a real Mastra server (bench/mastra, installed "
                                                              "from npm at the first use), given issue 31's requests")
    args = parser.parse_args()
    out = args.out or targets.result_path(args.quick, args.trace_memory, args.om)
    report = run(args.quick, args.om, args.workers, args.turns, args.seconds, args.trace_memory, args.mastra)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report.markdown())
    print(f"written to {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")


def run(quick: bool, om: bool = False, workers: int | None = None, turns: int | None = None,
        seconds: float | None = None, trace_memory: bool = False, mastra: bool = False) -> Report:
    """The whole workload against fresh servers and the bare server; its report (printed as it goes).
    ``mastra``: also a real Mastra server (chat-agent's OM as ours), given issue 31's two requests
    beside ours in each run."""
    # One traced gateway process: bench/traced.py's snapshots are per process, and every
    # worker runs the same code.
    workers = workers or (1 if trace_memory else None) or int(os.environ.get("DEV_SERVER_WORKERS") or 0) \
        or os.cpu_count() or 1
    turns = turns or (50 if quick else 100)
    seconds = seconds or (1.5 if quick else 5.0)
    scale = 5 if quick else 1  # the bulk writes and reads of a quick run are this much smaller
    report = Report(quick, f"settings: gateway of {workers} worker{'s' if workers > 1 else ''} (the bare "
                           f"server and the studio: one process each), "
                           f"{turns} turns per sequential scenario, {seconds:g} s per concurrency "
                           f"level, two runs, save-messages {10_000 // scale:,} messages, "
                           f"{2_000 // scale:,} threads created, {200 // scale} reads per page, "
                           f"chat-agent's Observational Memory {'on' if om else 'off'}"
                           + (", a real Mastra server beside ours (bench/mastra)" if mastra else "")
                           + (", servers under tracemalloc (figures are off)" if trace_memory else ""))
    for line in targets.machine():
        print(line)
    print(f"load average at start: {', '.join(f'{v:.2f}' for v in report.load_start)}")

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        data = tmp_path / "data"
        data.mkdir()
        db_path = data / "dev-server.db"
        for thread, count in (("bench-1k", 1_000), ("bench-10k", 10_000)):
            asyncio.run(seed(db_path, thread, count))
        asyncio.run(seed_threads(db_path, "bench-list", 10_000))
        studio_port, gateway_port = free_port(), free_port()
        env = server_env(data, studio_port, DEV_SERVER_WORKERS=str(workers),
                         DEV_SERVER_OM_ENABLED="true" if om else "false")
        launcher = [str(REPO / "bench" / "traced.py")] if trace_memory else ["-m", "dev_server"]

        def ours_env(name: str) -> dict[str, str]:
            return {**env, "BENCH_TRACE_OUT": str(tmp_path / f"{name}.snapshot")}

        studio = Server("studio", [sys.executable, *launcher, "studio", "--port", str(studio_port)], studio_port,
                        ours_env("studio"), tmp_path)
        gateway = Server("gateway", [sys.executable, *launcher, "gateway", "--port", str(gateway_port)],
                         gateway_port, ours_env("gateway"), tmp_path)
        ours = [gateway, studio]
        servers = list(ours)
        try:
            studio.wait_ready()
            gateway.wait_ready()
            rss = {"start": {s.name: s.rss_mb() for s in ours}}
            bare = start_bare(gateway, studio, tmp_path, env, report)
            servers.append(bare)
            rss["start"]["bare"] = bare.rss_mb()
            other = None
            if mastra:
                (tmp_path / "mastra").mkdir()
                other = mastra_server.start(tmp_path / "mastra", free_port(), om=om, log_dir=tmp_path)
                servers.append(other)
            print(f"{'figure':<56} {'ours':>12} {'bare':>12} {'ratio':>9}  ours, run 1 / run 2")
            run_all(report, gateway, studio, bare, turns, seconds, scale, rss, trace_memory, tmp_path, other)
        finally:
            for server in servers:
                server.stop()

    report.load_end = os.getloadavg()
    print(f"load average at end: {', '.join(f'{v:.2f}' for v in report.load_end)}")
    return report


def run_all(report: Report, gateway: Server, studio: Server, bare: Server, turns: int, seconds: float, scale: int,
            rss: dict[str, dict[str, float]], trace: bool, tmp: Path, mastra: Server | None = None) -> None:
    ours = [gateway, studio]
    row = report.row

    # CPU time comes in clock ticks (10 ms): the bare server's share of ``turns`` turns would be
    # a few ticks, so it runs more turns (its latencies only gain samples).
    bare_turns = max(300, 10 * turns)
    bare_before = bare.cpu_s()
    bare_seq = sequential(bare.url, "bare", bare_turns)
    time.sleep(SETTLE_S)
    bare_cpu = (bare.cpu_s() - bare_before) / (bare_turns + 3) * 1000
    for label, thread in (("fresh thread", None), ("1k-message thread", "bench-1k")):
        row(f"sequential turn p50, {label}, ms", pct(sequential(gateway.url, thread, turns), .5), pct(bare_seq, .5))
    # the thread's first turn: with OM on, its backlog is observed in bounded batches in the
    # background (docs/observational-memory.md#backlog); the figures are of the turns after it
    started, catch_up_before = time.perf_counter(), cpu(ours)
    sequential(gateway.url, "bench-10k", 1)
    background_idle(gateway.url, timeout=600, quiet_polls=10)
    catch_up_s, catch_up_cpu = time.perf_counter() - started, cpu(ours) - catch_up_before
    # as for the bare server, more turns than ``turns`` for the CPU figure: over 50 turns a
    # process's ticks made it move by a tenth from one run to the next; over 300 they also
    # span the buffering cycles a thread pays for in the long run (one every ~70 turns here)
    cpu_turns = max(300, 6 * turns)
    before = {s.name: s.cpu_s() for s in ours}
    times = sequential(gateway.url, "bench-10k", cpu_turns)
    time.sleep(SETTLE_S)
    split = {s.name: (s.cpu_s() - before[s.name]) / (cpu_turns + 3) * 1000 for s in ours}
    ours_cpu = sum(split.values())
    row("sequential turn p50, 10k-message thread, ms", pct(times, .5), pct(bare_seq, .5))
    row("sequential turn p99, 10k-message thread, ms", pct(times, .99), pct(bare_seq, .99))
    cpu_row = row(f"server CPU per turn (10k thread, sequential, after its first turn and catch-up), ms (gateway "
                  f"{split['gateway']:.2f} + studio {split['studio']:.2f})", ours_cpu, bare_cpu)
    row("10k thread: first 4 turns and the backlog's catch-up, wall s", catch_up_s, None)
    row("10k thread: first 4 turns and the backlog's catch-up, server CPU s", catch_up_cpu, None)
    rss["warm-up"] = {s.name: s.rss_mb() for s in (*ours, bare)}
    snapshots = {s.name: [s.snapshot(tmp / f"{s.name}.snapshot")] for s in ours} if trace else {}

    runs: list[dict[str, tuple[float, float | None]]] = []
    versus: list[dict[str, tuple[float, float]]] = []  # (ours, Mastra's) per run
    for server in (studio, mastra) if mastra else ():
        warm_up(server)
    for run in (1, 2):
        figures: dict[str, tuple[float, float | None]] = {}
        for clients in (8, 32, 128):
            before, bare_before, wall_before = cpu(ours), bare.cpu_s(), time.perf_counter()
            done, wall = concurrent(gateway.url, clients, seconds)
            ours_used, ours_wall = cpu(ours) - before, time.perf_counter() - wall_before
            bare_before, bare_wall_before = bare.cpu_s(), time.perf_counter()
            bare_done, bare_wall = concurrent(bare.url, clients, seconds)
            bare_used, bare_total_wall = bare.cpu_s() - bare_before, time.perf_counter() - bare_wall_before
            figures[f"turns/s, {clients} concurrent clients"] = (done / wall, bare_done / bare_wall)
            figures[f"server cores used, {clients} clients"] = (ours_used / ours_wall, bare_used / bare_total_wall)
            if clients == 32:  # the setup turns are counted: the CPU of every turn the clock saw
                figures["server CPU per turn, 32 clients, ms"] = (ours_used / (done + clients) * 1000,
                                                                  bare_used / (bare_done + clients) * 1000)
        one = statistics.median(sequential(gateway.url, None, 20))
        bare_one = statistics.median(sequential(bare.url, None, 20))
        first, bare_first = pct(burst(gateway.url, 32), .5), pct(burst(bare.url, 32), .5)
        figures["first turn of 32 new threads at once, p50, ms"] = (first, bare_first)
        figures["one sequential first turn (just before), median, ms"] = (one, bare_one)
        figures["burst p50 / one sequential turn"] = (first / one, bare_first / bare_one)
        figures[f"save-messages, {10_000 // scale:,} in batches of 500, msgs/s"] = (
            asyncio.run(save_messages(studio.url, 10_000 // scale, 500)), None)
        figures["POST /memory/threads, 8 clients, threads/s"] = (create_threads(studio.url, 2_000 // scale, 8), None)
        figures["thread list page (100 of 10k), p50 ms"] = (pct(reads(studio.url, LIST_PATH, 200 // scale), .5),
                                                           pct(reads(bare.url, LIST_PATH, 200 // scale), .5))
        figures["messages page (40 of 11k), p50 ms"] = (pct(reads(studio.url, MESSAGES_PATH, 200 // scale), .5),
                                                       pct(reads(bare.url, MESSAGES_PATH, 200 // scale), .5))
        if mastra:
            versus.append(against_mastra(studio, mastra, MASTRA_THREADS, (gateway,)))
        rss[f"run {run}"] = {s.name: s.rss_mb() for s in (*ours, bare)}
        for server in ours if trace else ():
            snapshots[server.name].append(server.snapshot(tmp / f"{server.name}.snapshot"))
        runs.append(figures)
        print(f"   (run {run} done)", flush=True)

    rows = {}
    for name in runs[0]:
        ours_values = [r[name][0] for r in runs]
        bare_values = [r[name][1] for r in runs]
        rows[name] = row(name, statistics.mean(ours_values),
                         None if bare_values[0] is None else statistics.mean(bare_values), runs=ours_values)
    for name in versus[0] if versus else ():
        report.versus(name, statistics.mean(r[name][0] for r in versus), statistics.mean(r[name][1] for r in versus),
                      runs=[r[name] for r in versus])
    # 32 turns sent at once on CPU-bound servers: the median one waits for about 16 turns' CPU
    # on the cores the servers use. The burst's p50 against this floor is its queueing beyond CPU.
    per_turn, cores = rows["server CPU per turn, 32 clients, ms"], rows["server cores used, 32 clients"]
    floor = row("burst p50 CPU floor: 16 x CPU per turn / cores used (32 clients), ms", 16 * per_turn.ours / cores.ours,
                16 * per_turn.bare / cores.bare)  # type: ignore[operator]
    first = rows["first turn of 32 new threads at once, p50, ms"]
    report.note(f"Burst: our p50 {first.ours:,.0f} ms is {first.ours / floor.ours:.1f}x its CPU floor "
                f"({floor.ours:,.0f} ms); the bare server's {first.bare:,.0f} ms is {first.bare / floor.bare:.1f}x "
                f"its floor. A burst p50 <= 4x one sequential turn needs turns that mostly wait, not compute: with "
                f"CPU-bound turns the floor alone is 16 / cores x CPU per turn, and the bare server's own ratio is "
                f"{rows['burst p50 / one sequential turn'].bare:.0f}x.")
    for stage, by_name in rss.items():
        when = "at" if stage == "start" else "after"
        row(f"RSS (PSS) {when} {stage}, MB (gateway {by_name['gateway']:.0f} + studio {by_name['studio']:.0f})",
            by_name["gateway"] + by_name["studio"], by_name.get("bare"))

    total = {stage: by_name["gateway"] + by_name["studio"] for stage, by_name in rss.items()}
    report.target(cpu_row.ratio is not None and cpu_row.ratio <= targets.CPU_RATIO_MAX,
                  f"server CPU per turn {cpu_row.ours:.2f} ms = {cpu_row.ratio or 0:.1f}x the bare server's "
                  f"{cpu_row.bare:.3f} ms (target <= {targets.CPU_RATIO_MAX:g}x)")
    turns_32 = rows["turns/s, 32 concurrent clients"].ours
    goal = targets.BASELINE_TURNS_32 * targets.TURNS_32_FACTOR
    report.target(turns_32 >= goal,
                  f"turns/s at 32 clients {turns_32:.1f} = {turns_32 / targets.BASELINE_TURNS_32:.2f}x the baseline "
                  f"{targets.BASELINE_TURNS_32} (commit 983b4ad, this 2-core machine; absolute, not a same-run ratio) "
                  f"(target >= {targets.TURNS_32_FACTOR:g}x = {goal:.1f})")
    burst_ratio = rows["burst p50 / one sequential turn"].ours
    report.target(burst_ratio <= targets.BURST_RATIO_MAX,
                  f"first-turn burst of 32 p50 = {burst_ratio:.1f}x one sequential turn (same run; "
                  f"target <= {targets.BURST_RATIO_MAX:g}x)")
    saved = rows[f"save-messages, {10_000 // scale:,} in batches of 500, msgs/s"].ours
    report.target(saved >= targets.SAVE_MESSAGES_MIN,
                  f"save-messages {saved:,.0f} msgs/s (target >= {targets.SAVE_MESSAGES_MIN:,.0f})")
    created = rows["POST /memory/threads, 8 clients, threads/s"].ours
    report.target(created >= targets.THREADS_MIN,
                  f"thread creation {created:,.0f} threads/s (target >= {targets.THREADS_MIN:,.0f})")
    report.target(total["run 2"] <= targets.RSS_RATIO_MAX * total["warm-up"],
                  f"RSS after the run {total['run 2']:.0f} MB = {total['run 2'] / total['warm-up']:.2f}x after "
                  f"warm-up {total['warm-up']:.0f} MB (gateway + studio; target <= {targets.RSS_RATIO_MAX:g}x)")
    grown = total["run 2"] / total["run 1"] - 1
    report.target(grown <= targets.RSS_FLAT_MAX,
                  f"RSS flat across the second identical run: {total['run 1']:.0f} -> {total['run 2']:.0f} MB "
                  f"({grown:+.1%}; flat means at most {targets.RSS_FLAT_MAX:+.0%})")
    for name, paths in snapshots.items():
        for i in (1, 2):
            report.note(f"\n{name}: tracemalloc growth, warm-up -> end of run {i} (top sites):\n```\n"
                        + "\n".join(growth(paths[0], paths[i])) + "\n```")


if __name__ == "__main__":
    main()
