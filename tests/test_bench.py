"""``make bench`` (issue 16 item 4): the workload runs against our servers and the bare
server in one run and writes a result file a user can read. Only its shape is checked, never
its times: every figure row, ours beside the bare server's where there is one, the machine
described, the bare server's bodies byte-identical to ours, and a PASS or FAIL line per target."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from bench.native_index_offline import ensure_python
from dev_server.storage.duckdb_store import CACHE_MB
from dev_server.storage.native_vectors import fill_sql, schema_statements
from tests.sqld import Sqld
from tests.support import REPO

# Each runs a benchmark for seconds, as a user would (the bench is the subject, not a unit)
pytestmark = pytest.mark.slow

FIGURES = ["sequential turn p50, fresh thread", "sequential turn p50, 10k-message thread",
           "server CPU per turn", "turns/s, 32 concurrent clients", "server cores used, 32 clients",
           "first turn of 32 new threads at once", "save-messages", "POST /memory/threads",
           "thread list page", "messages page", "RSS (PSS) after warm-up", "RSS (PSS) after run 2"]
TARGETS = ["server CPU per turn", "turns/s at 32 clients", "first-turn burst", "save-messages",
           "thread creation", "RSS after the run", "RSS flat"]


def test_the_quick_workload_writes_every_figure_and_a_verdict_per_target(tmp_path: Path):
    out = tmp_path / "result.md"
    done = subprocess.run([sys.executable, "bench/workload.py", "--quick", "--turns", "10", "--workers", "1",
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = out.read_text()
    assert "- CPU: " in text and "- commit: " in text and "load average" in text
    assert "byte-identical to ours" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| figure")]
    for figure in FIGURES:
        assert any(row.startswith(f"| {figure}") for row in rows), figure
    bare = next(row for row in rows if row.startswith("| server CPU per turn")).split("|")
    assert bare[3].strip() not in ("", "-") and bare[4].strip().endswith("x")  # the bare figure and the ratio
    verdicts = [line for line in text.splitlines() if line.startswith(("- **PASS**", "- **FAIL**"))]
    assert len(verdicts) == len(TARGETS)
    for target, line in zip(TARGETS, verdicts, strict=True):
        assert target in line, (target, line)


RECALL_ROWS = ["local embedder: texts/s", "index build end to end: messages/s", "index build, storage side: messages/s",
               "baseline: thread's newest 10 messages", "search_vector, thread scope, top 4",
               "search_vector, resource scope, top 10", "search, thread scope, top 4 (query text embedded)",
               "cold: first query, loads the copy", "first query after 64 new vectors"]


def test_the_quick_recall_bench_reports_rates_latencies_against_the_baseline_and_recall_at_k(tmp_path: Path):
    """``bench/recall.py``: every figure, each latency with its ratio to the raw-read baseline,
    and recall@k of the index (an exact scan) against the brute-force scan: 1.0."""
    out = tmp_path / "recall.md"
    done = subprocess.run([sys.executable, "bench/recall.py", "--quick", "--messages", "2000", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = out.read_text()
    assert "- CPU: " in text and "- commit: " in text and "load average" in text and "2,000 messages" in text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    for figure in RECALL_ROWS:
        assert any(row.startswith(f"| {figure}") for row in rows), figure
    latencies = [row.split("|") for row in rows if row.startswith(("| baseline", "| search", "| cold", "| first"))]
    assert all(cells[4].strip().endswith("x") for cells in latencies)
    recall = [row.split("|") for row in rows if row.startswith(("| thread |", "| resource |"))]
    assert [(cells[1].strip(), cells[2].strip()) for cells in recall] == [
        ("thread", "4"), ("thread", "10"), ("resource", "4"), ("resource", "10")]
    assert all(float(cells[3]) == 1.0 for cells in recall)
    assert "bytes" in text and "Indexer.run_once: messages written of the sample | 128 |" in text


def test_the_sqld_recall_bench_sets_the_servers_index_against_the_embedded_scan(tmp_path: Path):
    """``bench/recall_sqld.py``: the build, each sqld latency with its ratio to the embedded
    scan's in the same run, recall@10 against the exact scan, no hit outside its scope, RSS."""
    out = tmp_path / "recall-sqld.md"
    done = subprocess.run([sys.executable, "bench/recall_sqld.py", "--vectors", "1500", "--queries", "20",
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = out.read_text()
    assert "- CPU: " in text and "load average" in text and "1,500 synthetic unit vectors" in text
    rows = [line.split("|") for line in text.splitlines() if line.startswith("| sqld: ")]
    assert len(rows) == 3 and all(cells[4].strip().endswith("x") for cells in rows)
    assert "| sqld index build" in text and "(1,700 in" in text  # and the other resource's 200
    assert "hits from the other resource: 0; hits outside the asked thread: 0" in text
    assert float(text.split("exact scan's (resource scope): **")[1].split("**")[0]) >= 0.8
    assert "search process, sqld path" in text and "sqld's RSS before the queries" in text


def test_the_sqld_recall_bench_can_serve_a_file_indexed_offline(tmp_path: Path):
    """``--prebuilt`` (for 1,000,000 vectors): the SQLite file indexed by libsql's engine with
    the server path's statements, then served by sqld, answers as the server-built index does."""
    out = tmp_path / "recall-sqld.md"
    done = subprocess.run([sys.executable, "bench/recall_sqld.py", "--vectors", "1500", "--queries", "20",
                           "--prebuilt", "--tmp", str(tmp_path), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = out.read_text()
    assert "--prebuilt" in text.splitlines()[0] and "| offline: libsql's engine" in text and "(1,700 in" in text
    assert "rows written to sqld without the index" not in text  # sqld serves the copy; nothing was sent to it
    assert "hits from the other resource: 0; hits outside the asked thread: 0" in text
    assert float(text.split("exact scan's (resource scope): **")[1].split("**")[0]) >= 0.8


def test_the_offline_index_build_resumes_in_a_kept_work_directory(tmp_path: Path):
    """``--workdir`` (a 1,000,000-vector build takes an hour here): a run
    stopped while the copy was being indexed leaves the SQLite file and the copy; the next run
    with the same directory writes nothing again and indexes only what was left."""
    work, out = tmp_path / "work", tmp_path / "recall-sqld.md"
    command = [sys.executable, "bench/recall_sqld.py", "--vectors", "1500", "--queries", "20", "--prebuilt",
               "--workdir", str(work), "--out", str(out)]
    first = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "(1,700 in" in out.read_text() and not (work / "copy.complete").exists()  # served: made again next time
    # what a build stopped half way leaves: the copy, its first 850 vectors indexed
    data = Sqld(work / "sqld").data_file
    shutil.rmtree(work / "sqld")
    data.parent.mkdir(parents=True)
    with closing(sqlite3.connect(work / "embedded.db")) as source, closing(sqlite3.connect(data)) as copy:
        source.backup(copy)
    plan = tmp_path / "half.json"
    plan.write_text(json.dumps({"schema": schema_statements(384), "chunk": 1_000, "fill": fill_sql(384, 1_000),
                                "ids": "SELECT id FROM message_vectors WHERE id > ? AND id <= 850 ORDER BY id LIMIT ?",
                                "count": "SELECT 0"}))
    half = subprocess.run([str(ensure_python()), "bench/native_index_offline.py", str(data), str(plan)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert half.returncode == 0, half.stderr[-3000:]
    with closing(sqlite3.connect(data)) as copy:  # built through a rollback journal, left as sqld serves it
        assert copy.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    (work / "copy.complete").touch()
    second = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    text = out.read_text()
    assert "| by an earlier run |" in text and "(850 in" in text and "after 850 indexed by earlier runs" in text
    assert "hits from the other resource: 0; hits outside the asked thread: 0" in text
    assert float(text.split("exact scan's (resource scope): **")[1].split("**")[0]) >= 0.8


def test_the_scale_out_bench_compares_one_and_two_replicas_on_sqld_with_the_file(tmp_path: Path):
    """``bench/scale_out.py``: three scenarios in one run, each with its rate against the
    embedded file's and the server requests one turn costs."""
    out = tmp_path / "scale.md"
    done = subprocess.run([sys.executable, "bench/scale_out.py", "--seconds", "1", "--clients", "4", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split("|")[1:-1] for line in out.read_text().splitlines()
            if line.startswith("| ") and "turns/s" not in line]
    assert [r[0].strip() for r in rows] == ["1 gateway, embedded file (baseline)", "1 gateway, sqld",
                                            "2 gateways, sqld"]
    assert all(float(r[1]) > 0 for r in rows) and rows[0][2].strip() == "1.00"
    assert float(rows[1][6]) > 0 and float(rows[2][6]) > 0  # write requests per turn, read from /health


def test_the_soak_bench_reports_rss_ratios_per_round_spans_and_a_verdict_per_target(tmp_path: Path):
    """``bench/soak.py`` (issue 25), a few seconds long: a row per round (warm-up, then the
    rounds of at most a minute) with the gateway's RSS as a ratio to the first round's, the
    span counters summed from the gateway's ``/health``, and a PASS or FAIL line per target."""
    out = tmp_path / "soak.md"
    done = subprocess.run([sys.executable, "bench/soak.py", "--minutes", "0.1", "--warmup-s", "2", "--clients", "2",
                           "--threads-per-client", "2", "--workers", "1", "--history", "4", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = out.read_text()
    assert "- CPU: " in text and "- commit: " in text and "load average" in text and "2 clients" in text
    header = next(line for line in text.splitlines() if line.startswith("| round |"))
    columns = [cell.strip() for cell in header.split("|")[1:-1]]
    rows = [dict(zip(columns, (cell.strip() for cell in line.split("|")[1:-1]), strict=False))
            for line in text.splitlines() if line.startswith(("| warm-up |", "| min "))]
    assert [row["round"] for row in rows] == ["warm-up", "min 1"]
    assert float(rows[1]["ratio"]) == 1.0 and float(rows[0]["turns/s"]) > 0  # min 1 is the ratios' reference
    assert int(rows[1]["spans exported"].replace(",", "")) > 0 and rows[1]["export busy"].endswith("%")
    assert "spans exported" in text and "turns/s (warm-up not counted)" in text
    verdicts = [line for line in text.splitlines() if line.startswith(("- **PASS**", "- **FAIL**"))]
    assert len(verdicts) == 6 and "gateway RSS" in verdicts[0] and "spans dropped" in verdicts[5]
    assert "gateway RSS after the last round" in verdicts[1] and "after start" in verdicts[1]  # issue 31's
    assert "studio RSS after the last round" in verdicts[2] and "before its first turn" in verdicts[2]
    assert "gateway: largest process" in verdicts[3] and "studio: largest process" in verdicts[4]  # per process
    assert "= 180 MB a process" in verdicts[4]
    limit = re.search(r"\(DuckDB\) at the end: memory limit (\d+) MB", text)
    assert limit and CACHE_MB <= int(limit[1]) < CACHE_MB + 8  # the room plus its few keys
    assert "of 4 stored messages each" in text and "observation at 2,000 message tokens" in text
    assert "Observational Memory over the run: 4 of 4 conversations have a record" in text
