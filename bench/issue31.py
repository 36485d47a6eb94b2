"""Issue 31's benchmark in one run (``make bench``): every item's figures, its targets as
PASS/FAIL lines, one report.

Each part is another bench script's own measurement, called as a function in this process
(what each measures, and how, is in that script's docstring):

1. ``bench/workload.py`` twice, chat-agent's Observational Memory off, then on: each figure
   beside the bare server's, and OM on against OM off;
   ``bench/om_long_thread.py``: last/first per window size, CPU per turn OM on/off on a fresh
   and on imported threads (quick sizes unless ``--long-thread-full``);
2. ``bench/local_om.py``: the local observer's and reflector's output against their inputs;
3. ``bench/span_cost.py``: telemetry's share of a studio turn's CPU;
4. ``bench/footprint.py``: RSS per process after start and after a load, time to ``status: ok``;
5. ``bench/group_commit.py``: thread creations at 8 in flight, group commit against one
   transaction per write (and the workload's thread creation and burst of 32 first turns);
6. ``bench/recall.py`` at a small size (the embedded scan); ``--sqld`` adds
   ``bench/recall_sqld.py`` (libsql's vector index on sqld: its index builds are slow).

Targets against Mastra's own figures (item 5) need a Mastra server: ``--mastra`` starts a real
one (bench/mastra_server.py, installed from npm at the first use) beside ours in both
workloads, with chat-agent's OM as ours, and gives both the same requests one right after the
other; without it they are printed as N/A with our figures. The header has the machine, the commit and the load
average at the start and the end: other work on the machine slows every figure, ratios
measured in the same run much less.
Written to bench/results/<date>-<commit>-issue31[-quick].md (``--out`` elsewhere).
Run: ``make bench`` (``QUICK=1``: every part smaller, about 5 minutes on a quiet 2-core
machine) or ``.venv/bin/python bench/issue31.py [--quick] [--long-thread-full] [--sqld]
[--mastra] [--workers N] [--out PATH]``. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import footprint, group_commit, local_om, om_long_thread, recall, recall_sqld, span_cost, versus_mastra  # noqa: E402
from bench import workload as workload_bench  # noqa: E402
from bench.report import Report, commit, machine  # noqa: E402
from bench.report import _num as num  # noqa: E402
from dev_server.llm.local_observer import OBSERVATION_TOKENS  # noqa: E402

# Issue 31's targets.
OM_CPU_RATIO_MAX = 1.5
LAST_FIRST_MAX = 1.2
RSS_AFTER_START_MB = 150.0
RSS_AFTER_LOAD_RATIO = 1.2
OK_AFTER_S = 2.0
RECALL_AT_10_MIN = 0.95
THREADS_VS_MASTRA_MIN = 2.0
FIRST_TURNS_VS_MASTRA_MAX = 1.0


@dataclass(frozen=True)
class Sizes:
    workload_turns: int | None  # None: the workload's own default for its mode
    workload_seconds: float | None
    long_thread: tuple[int, int, tuple[int, ...]] | None  # turns, CPU block, imports; None: the script's quick
    local_om_top: int
    span_turns: int
    span_rounds: int
    footprint_seconds: float
    commit_runs: int
    commit_writes: int
    recall_messages: int
    sqld_vectors: int


SIZES = {
    "full": Sizes(None, None, None, 5_000_000, 200, 3, 30, 5, 3_000, 20_000, 100_000),
    "quick": Sizes(None, None, None, 1_000_000, 100, 2, 5, 3, 1_000, 2_000, 5_000),
    # The smallest run that goes through every part (tests/test_bench.py): its figures mean nothing.
    "smoke": Sizes(5, 0.5, (20, 5, (1_000,)), 100_000, 5, 1, 1, 1, 100, 500, 1_500),
}


@dataclass
class Suite:
    mode: str  # full | quick | smoke
    verdicts: list[tuple[str, str]] = field(default_factory=list)  # (PASS | FAIL | N/A | INFO, text)
    sections: list[str] = field(default_factory=list)
    load_start: tuple[float, ...] = field(default_factory=os.getloadavg)
    commit_start: str = field(default_factory=commit)

    def target(self, ok: bool | None, text: str) -> None:
        verdict = "N/A" if ok is None else "PASS" if ok else "FAIL"
        self.verdicts.append((verdict, text))
        print(f"{verdict:<4}  {text}", flush=True)

    def info(self, text: str) -> None:
        self.verdicts.append(("INFO", text))
        print(f"INFO  {text}", flush=True)

    def section(self, title: str, text: str) -> None:
        """A part's own report under ``title``: its title and machine lines dropped (the header
        has them), its headings one level down."""
        known = {f"- {line}" for line in machine()}
        lines = [line for line in text.strip().splitlines() if line not in known and not line.startswith("# ")]
        lines = [f"#{line}" if line.startswith("##") else line for line in lines]
        body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines).strip())
        self.sections.append(f"## {title}\n\n{body}")

    @property
    def quick(self) -> bool:
        return self.mode != "full"

    def markdown(self, settings: str) -> str:
        load = ", ".join(f"{v:.2f}" for v in self.load_start)
        end = ", ".join(f"{v:.2f}" for v in os.getloadavg())
        lines = [f"# Issue 31 benchmark{'' if self.mode == 'full' else f' ({self.mode})'}, "
                 f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
                 *(f"- {line}" for line in machine()),
                 f"- load average (1, 5, 15 min) at start: {load}; at end: {end} (other work on the machine "
                 "shares its cores: judge the figures by it)", f"- {settings}"]
        if commit() != self.commit_start:
            lines.append(f"- the checkout changed during the run (commit {self.commit_start} at the start)")
        lines += ["", "## Targets (issue 31)", "",
                  *(f"- **{verdict}** {text}" for verdict, text in self.verdicts), "", "\n\n".join(self.sections)]
        return "\n".join(lines) + "\n"


def _figure(name: str) -> str:
    """A workload row's figure without its per-process split, so OM off and on meet by name."""
    return re.sub(r" \((gateway [\d.]+ \+ studio [\d.]+)\)$", "", name)


def workloads(suite: Suite, sizes: Sizes, workers: int | None, mastra: bool) -> None:
    """Item 1 (and 5) end to end: the workload with OM off, then on, each against the bare server
    (and with ``mastra`` against a real Mastra server with chat-agent's OM off, then on)."""
    runs: dict[str, Report] = {}
    for label, om in (("off", False), ("on", True)):
        print(f"== bench/workload.py{' --mastra' if mastra else ''}, Observational Memory {label}", flush=True)
        runs[label] = workload_bench.run(suite.quick, om=om, workers=workers, turns=sizes.workload_turns,
                                         seconds=sizes.workload_seconds, mastra=mastra)
    off = {_figure(r.figure): r for r in runs["off"].rows}
    on = {_figure(r.figure): r for r in runs["on"].rows}
    settings = runs["off"].settings.replace("Observational Memory off", "Observational Memory off, then on")
    lines = [f"- {settings}; the servers started afresh for each", "",
             "| figure | OM off | OM on | bare server | on / off | off / bare | on / bare |",
             "|---|---:|---:|---:|---:|---:|---:|"]

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}x" if a is not None and b else "-"

    for name, row_off in off.items():
        row_on = on.get(name)
        ours_on = row_on.ours if row_on else None
        bare = row_off.bare
        lines.append(f"| {name} | {num(row_off.ours)} | {num(ours_on)} | {num(bare)} | "
                     f"{ratio(ours_on, row_off.ours)} | {ratio(row_off.ours, bare)} | {ratio(ours_on, bare)} |")
    for label, report in runs.items():
        lines += ["", f"Issue 16's targets, OM {label}: " + "; ".join(
            f"{'PASS' if ok else 'FAIL'} {text.split(' (target')[0]}" for ok, text in report.targets)]
    suite.section("Workload with Observational Memory off and on, against the bare server (bench/workload.py)",
                  "\n".join([*lines, "", *runs["off"].notes[:1]]))
    cpu = "server CPU per turn (10k thread, sequential, after its first turn and catch-up), ms"
    cpu_on_off = on[cpu].ours / off[cpu].ours
    suite.target(cpu_on_off <= OM_CPU_RATIO_MAX,
                 f"server CPU per turn on the 10k-message thread after its catch-up (gateway + studio, HTTP), "
                 f"OM on {on[cpu].ours:.2f} ms "
                 f"= {cpu_on_off:.2f}x OM off {off[cpu].ours:.2f} ms (bare server {off[cpu].bare:.3f} ms; target "
                 f"<= {OM_CPU_RATIO_MAX}x)")
    if mastra:
        against_mastra(suite, runs)
        return
    created, first = "POST /memory/threads, 8 clients, threads/s", "first turn of 32 new threads at once, p50, ms"
    suite.target(None, f"thread creation at 8 in flight >= 2x Mastra's rate: no Mastra server in this run (make "
                       f"bench MASTRA=1); ours {off[created].ours:,.0f} threads/s (OM off), {on[created].ours:,.0f} "
                       "(OM on)")
    suite.target(None, f"a burst of 32 first turns p50 <= Mastra's: no Mastra server in this run (make bench "
                       f"MASTRA=1); ours {off[first].ours:,.0f} ms with OM off on the gateway's /api/chat "
                       f"({off[first].ratio or 0:.1f}x the bare server's), {on[first].ours:,.0f} ms with OM on")


def against_mastra(suite: Suite, runs: dict[str, Report]) -> None:
    """Item 5's targets: our studio against a real Mastra server with chat-agent's OM the same,
    each request measured on ours and right after on Mastra's, in both of the workload's runs."""
    lines = ["Mastra 1.x's own server (bench/mastra: @mastra/deployer's createNodeServer, as `mastra dev` starts "
             "it; chat-agent with Memory on LibSQL and an instant mock model) beside our studio; each request "
             "measured on ours, then on Mastra's, in each of the workload's two runs (their mean); thread "
             f"creation: {versus_mastra.MASTRA_THREADS:,} threads on each server per run, in two halves taking "
             "turns, once our servers' background work has settled.", "",
             "| figure | OM | ours | Mastra | ours / Mastra | run 1 / run 2 (ours vs Mastra) |",
             "|---|---|---:|---:|---:|---:|"]
    found = {}
    for label, report in runs.items():
        for row in report.mastra:
            found[row.figure, label] = row
            lines.append(f"| {row.figure} | {label} | {num(row.ours)} | {num(row.mastra)} | {row.ratio:.2f}x | "
                         f"{row.runs} |")
    suite.section("Against a real Mastra server (bench/mastra, bench/workload.py --mastra)", "\n".join(lines))
    for label in runs:
        created, cpu = found[versus_mastra.VERSUS_CREATED, label], found[versus_mastra.VERSUS_CREATED_CPU, label]
        generator = found[versus_mastra.VERSUS_LOADGEN_CPU, label]
        suite.target(created.ratio >= THREADS_VS_MASTRA_MIN,
                     f"thread creation at 8 in flight, OM {label}: ours {created.ours:,.0f} threads/s = "
                     f"{created.ratio:.2f}x Mastra's {created.mastra:,.0f} (server CPU per thread {cpu.ours:.2f} ms "
                     f"against {cpu.mastra:.2f}; the load generator's {generator.ours:.2f} and {generator.mastra:.2f}; "
                     f"target >= {THREADS_VS_MASTRA_MIN:g}x)")
        refused = found[versus_mastra.VERSUS_REFUSED, label]
        suite.info(f"the creation route without its write, OM {label} (a body without resourceId, answered 400 "
                   f"before any storage): ours {refused.ours:,.0f} requests/s = {refused.ratio:.2f}x Mastra's "
                   f"{refused.mastra:,.0f}; creating at {THREADS_VS_MASTRA_MIN:g}x Mastra's rate needs "
                   f"{THREADS_VS_MASTRA_MIN * created.mastra:,.0f} threads/s, "
                   f"{THREADS_VS_MASTRA_MIN * created.mastra / refused.ours:.2f}x what our route answers with no write")
        first = found[versus_mastra.VERSUS_FIRST, label]
        suite.target(first.ratio <= FIRST_TURNS_VS_MASTRA_MAX,
                     f"a burst of 32 first turns on POST /api/agents/chat-agent/stream, OM {label}: p50 ours "
                     f"{first.ours:,.0f} ms = {first.ratio:.2f}x Mastra's {first.mastra:,.0f} ms (target <= "
                     "Mastra's)")


def long_thread(suite: Suite, sizes: Sizes, full: bool) -> None:
    print(f"== bench/om_long_thread.py{'' if full else ' --quick'}", flush=True)
    watch = om_long_thread.watching()
    windows, imports, new, load = asyncio.run(om_long_thread.measure(not full, watch, sizes.long_thread))
    suite.section("Observational Memory on a long thread (bench/om_long_thread.py"
                  f"{'' if full else ' --quick'})", om_long_thread.report(not full, windows, imports, new, load, watch))
    for w in windows:
        suite.target(w["ratio"] <= LAST_FIRST_MAX,
                     f"last/first over {w['turns']} turns at messageTokens {w['tokens']:,}: {w['ratio']:.2f}x "
                     f"(median CPU excl. model of the last 10 turns over the first 10; target <= {LAST_FIRST_MAX} "
                     f"over 600 turns{'' if w['turns'] >= 600 else ': LONG=1 runs 600'})")
    for label, on, off in [("a fresh thread", new["on"], new["off"]),
                           *((f"a {i['size']:,}-message imported thread, after a catch-up of {i['catch_up_turns']} "
                              f"turns (first turn {i['first_s']:.2f} s)", i["on"], i["off"]) for i in imports)]:
        suite.target(on[1] / off[1] <= OM_CPU_RATIO_MAX,
                     f"CPU per turn on {label}, OM on {on[1] * 1000:.2f} ms = {on[1] / off[1]:.2f}x OM off "
                     f"{off[1] * 1000:.2f} ms (in-process, excl. the actor's model calls; excl. every model call, "
                     f"the local observer's and reflector's too: {on[2] / off[2]:.2f}x; target <= "
                     f"{OM_CPU_RATIO_MAX}x)")


def local_observer(suite: Suite, sizes: Sizes) -> None:
    top = sizes.local_om_top
    print(f"== bench/local_om.py {top}", flush=True)
    lines, found = local_om.run(top)
    suite.section("The local observer and reflector (bench/local_om.py)", "\n".join(lines))
    read, written = max(found["observer"])
    suite.target(max(out for _, out in found["observer"]) <= OBSERVATION_TOKENS,
                 f"local observer bounded: {written:,} tokens out of {read:,} in (largest input), at most "
                 f"{max(out for _, out in found['observer']):,} at any input (target <= {OBSERVATION_TOKENS:,}, a "
                 "real observer's output per call)")
    for tokens, outputs in found["reflector"]:
        suite.target(max(outputs) < local_om.THRESHOLD,
                     f"local reflector on a {tokens:,}-token log: {', '.join(f'{o:,}' for o in outputs)} tokens at "
                     f"levels 0-4 (target: each under the reflection threshold {local_om.THRESHOLD:,})")
    cycles = found["cycles"]
    suite.target(cycles["largest"] < cycles["threshold"],
                 f"30 observation cycles of 1,000 messages: largest active log {cycles['largest']:,} tokens after "
                 f"{cycles['reflections']} reflections (target: under the threshold {cycles['threshold']:,})")


def telemetry(suite: Suite, sizes: Sizes) -> None:
    args = argparse.Namespace(turns=sizes.span_turns, rounds=sizes.span_rounds, big_kb=4, baseline=None)
    print("== bench/span_cost.py", flush=True)
    measured = span_cost.measure(args)
    suite.section("Telemetry's share of a studio turn (bench/span_cost.py)", span_cost.table(args, *measured))
    count = args.turns * args.rounds
    shares = {name: span_cost.per_turn_ms(measured[0], count, name) for name in measured[2]}
    suite.info("telemetry's share of a studio turn's CPU (issue 31 sets no number: off the turn's path): "
               + "; ".join(f"{name} messages {(on - off) / on * 100:.1f} % ({on:.2f} ms on, {off:.2f} ms off)"
                           for name, (on, off) in shares.items()))


def processes(suite: Suite, sizes: Sizes) -> None:
    args = argparse.Namespace(seconds=sizes.footprint_seconds, clients=4, threads=20, baseline=None,
                              load_start=" ".join(f"{v:.2f}" for v in os.getloadavg()))
    print("== bench/footprint.py", flush=True)
    results = footprint.run(args)
    suite.section("Footprint and start-up per process (bench/footprint.py)", footprint.report(results, args))
    bare = next(r for r in results if r["name"] == "bare")
    bare_mb = sum(mb for _, mb, _ in bare["start"].values())
    for result in results:
        if result["name"] == "bare":
            continue
        start = {pid: mb for pid, (_, mb, _) in result["start"].items()}
        after = {pid: mb for pid, (kind, mb, _) in result.get("after", {}).items() if pid in start}
        suite.target(max(start.values()) <= RSS_AFTER_START_MB,
                     f"{result['name']}: RSS after start {', '.join(f'{mb:.0f}' for mb in start.values())} MB per "
                     f"process ({max(start.values()) / bare_mb:.1f}x a bare FastAPI app's {bare_mb:.0f} MB; target "
                     f"<= {RSS_AFTER_START_MB:.0f} MB)")
        grown = max(after[pid] / start[pid] for pid in after) if after else float("nan")
        suite.target(grown <= RSS_AFTER_LOAD_RATIO,
                     f"{result['name']}: RSS after {args.seconds:g} s of load / after start, at most {grown:.2f}x "
                     f"(target <= {RSS_AFTER_LOAD_RATIO}x after a 10-minute soak: bench/soak.py runs that)")
        suite.target(result["ok_s"] <= OK_AFTER_S,
                     f"{result['name']}: status ok {result['ok_s']:.2f} s after spawn, {result['ok_cpu_s']:.2f} s of "
                     f"CPU (bare app {bare['ok_s']:.2f} s; target <= {OK_AFTER_S:g} s)")


def writes(suite: Suite, sizes: Sizes) -> None:
    runs, count = sizes.commit_runs, sizes.commit_writes
    print("== bench/group_commit.py", flush=True)
    lines, found = asyncio.run(group_commit.compare(runs, count, 0.3, in_flights=(8,)))
    suite.section("Write batching in the store (bench/group_commit.py)", "\n".join(lines))
    shipped = statistics.median(f[0] for f in found[8]["as shipped"])
    single = statistics.median(f[0] for f in found[8]["baseline"])
    suite.info(f"thread creation at 8 in flight in the store alone: {shipped:,.0f} writes/s with group commit = "
               f"{shipped / single:.2f}x one transaction per write ({single:,.0f}), same run")


def semantic_recall(suite: Suite, sizes: Sizes, sqld: bool) -> None:
    n = sizes.recall_messages
    print(f"== bench/recall.py --messages {n}", flush=True)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    figures, latencies, found = asyncio.run(recall.run(n, suite.quick))
    suite.section("Semantic recall, the embedded scan (bench/recall.py)",
                  recall.report(figures, latencies, found, suite.quick, load))
    at_10 = min(r for scope, k, r, _ in found if k == 10)
    suite.target(at_10 >= RECALL_AT_10_MIN,
                 f"embedded recall@10 {at_10:.3f} against a brute-force scan at {n:,} messages; resource-scope "
                 f"search p50 {recall.pct(latencies['resource10'], .5) * 1000:.2f} ms (target >= {RECALL_AT_10_MIN})")
    if not sqld:
        suite.target(None, "recall@10 of libsql's vector index on sqld >= 0.95: not run (make bench SQLD=1, "
                           "or --sqld: index builds are slow)")
        return
    vectors = sizes.sqld_vectors
    print(f"== bench/recall_sqld.py --vectors {vectors}", flush=True)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        served = asyncio.run(recall_sqld.run(vectors, 200, Path(tmp)))
    text = recall_sqld.report(served, load)
    suite.section("Semantic recall on sqld, against the embedded scan (bench/recall_sqld.py)", text)
    value = float(text.split("exact scan's (resource scope): **")[1].split("**")[0])
    suite.target(value >= RECALL_AT_10_MIN, f"recall@10 of libsql's vector index on sqld at {vectors:,} vectors: "
                                            f"{value:.3f} (target >= {RECALL_AT_10_MIN})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="every part smaller (about 5 minutes on 2 cores)")
    parser.add_argument("--long-thread-full", action="store_true",
                        help="bench/om_long_thread.py at full size (600 turns, the 100k import: long)")
    parser.add_argument("--smoke", action="store_true", help="the smallest run through every part (the tests'; its "
                                                             "figures mean nothing)")
    parser.add_argument("--sqld", action="store_true", help="also recall on sqld with libsql's vector index (slow)")
    parser.add_argument("--workers", type=int, help="gateway workers in the workload (default as make dev)")
    parser.add_argument("--mastra", action="store_true",
                        help="also a real Mastra server (bench/mastra, npm ci at the first use): item 5's targets")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/<date>-<commit>-issue31.md)")
    args = parser.parse_args()
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    suite, sizes = Suite(mode), SIZES[mode]
    name = f"{time.strftime('%Y-%m-%d', time.gmtime())}-{suite.commit_start}-issue31"
    out = args.out or REPO / "bench" / "results" / f"{name}{'' if mode == 'full' else '-' + mode}.md"
    for line in machine():
        print(line)
    print(f"load average at start: {', '.join(f'{v:.2f}' for v in suite.load_start)}", flush=True)
    started = time.perf_counter()
    workloads(suite, sizes, args.workers, args.mastra)
    long_thread(suite, sizes, args.long_thread_full)
    local_observer(suite, sizes)
    telemetry(suite, sizes)
    processes(suite, sizes)
    writes(suite, sizes)
    semantic_recall(suite, sizes, args.sqld)
    settings = (f"{mode} run; long thread at "
                f"{'full' if args.long_thread_full else 'quick'} size; sqld recall {'on' if args.sqld else 'off'}; "
                f"Mastra server {'on' if args.mastra else 'off'}; "
                f"took {(time.perf_counter() - started) / 60:.1f} min")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(suite.markdown(settings))
    print(f"written to {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")


if __name__ == "__main__":
    main()
