"""Build the libsql vector index of a database file before a sqld serves it (bench/recall_sqld.py
--prebuilt): at 1,000,000 vectors the build through the server (``NativeVectors.fill``) took
hours here and its replication log grew to ~60 KB a vector, so the file is indexed in this
process by libsql's engine (the ``libsql`` package, in its own virtualenv made at the first use:
``ensure_python``), then handed to sqld, which serves it as it is.

The statements are the server path's (``NativeVectors`` makes the side table, its index and
triggers; the same fill statement indexes the vectors, a chunk a transaction); this script
only runs them, so it imports nothing of dev_server and needs only ``libsql``.

``python native_index_offline.py DB PLAN_JSON`` (run with ``ensure_python()``'s
interpreter): PLAN_JSON is ``{"schema": [...], "ids": sql, "fill": sql, "chunk": n, "count":
sql}``: the schema's statements (all ``IF NOT EXISTS``), the query of the ids to index (after
``?``, at most ``?``: those not indexed yet, so a stopped build resumes), the statement that
indexes ``chunk`` of them (a shorter last chunk repeats its last id: ``IN`` takes it once),
and the count of those indexed already.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

LIBSQL = "libsql==0.1.11"
# A vector insert rewrites the blocks of up to max_neighbors nodes: in WAL mode every page is
# written twice (the WAL, then the checkpoint). A rollback journal holds a page's old content
# once per transaction, and a process stopped mid-transaction still leaves a file its next
# open rolls back (resumable); synchronous=OFF only gives up safety against a power loss,
# which a benchmark's copy does not need. 30,000 vectors: 479/s in WAL mode, 845/s so.
BUILD_PRAGMAS = ("journal_mode=TRUNCATE", "synchronous=OFF", "locking_mode=EXCLUSIVE", "cache_size=-262144")
SERVED_PRAGMAS = ("locking_mode=NORMAL", "journal_mode=WAL")
VENV = Path(__file__).resolve().parent / ".venv-libsql"


def ensure_python() -> Path:
    """An interpreter with ``libsql`` (a virtualenv beside this script, made once)."""
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", LIBSQL], check=True)
    return python


def build(db: str, plan: dict) -> None:
    import libsql

    con = libsql.connect(db)
    for pragma in BUILD_PRAGMAS:
        con.execute(f"PRAGMA {pragma}")
    for statement in plan["schema"]:
        con.execute(statement)
    con.commit()
    (before,) = con.execute(plan["count"]).fetchone()  # indexed by an earlier, stopped run
    ids = [row[0] for row in con.execute(plan["ids"], (0, 2**62)).fetchall()]
    started, last, chunk = time.perf_counter(), time.perf_counter(), plan["chunk"]
    for at in range(0, len(ids), chunk):
        part = ids[at:at + chunk]
        con.execute(plan["fill"], part + part[-1:] * (chunk - len(part)))
        con.commit()
        if time.perf_counter() - last > 60:
            last = time.perf_counter()
            done = at + len(part)
            print(f"  indexed {done:,} of {len(ids):,} ({done / (last - started):.0f}/s)", flush=True)
    for pragma in SERVED_PRAGMAS:  # the file as the SQLite file was, for sqld
        con.execute(f"PRAGMA {pragma}")
    con.commit()
    print(json.dumps({"indexed": len(ids), "before": before, "seconds": time.perf_counter() - started}), flush=True)


if __name__ == "__main__":
    build(sys.argv[1], json.loads(Path(sys.argv[2]).read_text()))
