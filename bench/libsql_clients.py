"""Which client talks to the libsql server (issue 15.1), on one sqld started here: ours
(``dev_server.storage.remote``: sqld's Hrana HTTP pipeline, statements batched per transaction,
over the standard library's kept-alive ``http.client``), the same protocol and batching
over httpx, and the ``libsql`` package's remote mode (run from worker threads, as the
issue suggests).

Three operations, each timed sequentially and with 16 at once, the baseline being the same
operation on the embedded file (``dev_server.storage.libsql``) in the same run:
* a point read (one thread by id);
* a write transaction of three statements (what storing a turn's messages costs);
* a read-then-write transaction (the lease's shape: read, decide, write).

``python bench/libsql_clients.py [--count N]``; the ``libsql`` package is optional: without
it, its rows say so (``pip install --target /tmp/libsqlpy libsql`` and set PYTHONPATH).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dev_server.storage.libsql import LibSQLStore  # noqa: E402
from dev_server.storage.remote import RemoteLibSQLStore  # noqa: E402
from tests.sqld import Sqld  # noqa: E402

SETUP = ["CREATE TABLE IF NOT EXISTS bench_kv (id INTEGER PRIMARY KEY, thread TEXT, value TEXT)",
         "INSERT OR IGNORE INTO bench_kv (id, thread, value) VALUES (1, 't', 'v')"]


def store_ops(store: LibSQLStore | RemoteLibSQLStore) -> dict[str, Callable[[int], Awaitable[object]]]:
    def write(i: int):
        def work(conn):
            for n in range(3):
                conn.execute("INSERT INTO bench_kv (thread, value) VALUES (?, ?)", (f"w{i}", f"v{n}"))
        return store.run_write(work)

    def read_write(i: int):
        def work(conn):
            row = conn.execute("SELECT value FROM bench_kv WHERE id = 1").fetchone()
            conn.execute("INSERT INTO bench_kv (thread, value) VALUES (?, ?)", (f"rw{i}", row[0]))
        return store.run_write(work)

    return {"point read": lambda i: store.fetch_one("SELECT * FROM bench_kv WHERE id = ?", (1,)),
            "write (3 statements)": write, "read then write": read_write}


def httpx_ops(url: str, pool: ThreadPoolExecutor) -> dict[str, Callable[[int], Awaitable[object]]]:
    """The same protocol and batching as ours, over httpx's sync client (one per thread)."""
    import threading

    import httpx
    import orjson

    from dev_server.storage.hrana import JSON_HEADERS, Transaction, answer_of, read_result, statement
    from dev_server.storage.remote import pipeline_url

    class HttpxPipeline:  # what hrana.PipelineClient does, over httpx
        def __init__(self) -> None:
            self.url, self.http = pipeline_url(url), httpx.Client(timeout=10)

        def post(self, body: dict) -> dict:
            response = self.http.post(self.url, content=orjson.dumps(body), headers=JSON_HEADERS)
            return answer_of(response.status_code, response.content, self.url)

    local, writing = threading.local(), threading.Lock()

    def client() -> HttpxPipeline:
        if not hasattr(local, "client"):
            local.client = HttpxPipeline()
        return local.client

    def read(_: int):
        body = {"requests": [{"type": "execute", "stmt": statement("SELECT * FROM bench_kv WHERE id = ?", (1,))},
                             {"type": "close"}]}
        return read_result(client().post(body))

    def transaction(work):
        with writing:
            txn = Transaction(client())
            work(txn)
            txn.commit()

    def write(i: int):
        transaction(lambda c: [c.execute("INSERT INTO bench_kv (thread, value) VALUES (?, ?)", (f"h{i}", f"v{n}"))
                               for n in range(3)])

    def read_write(i: int):
        def work(c):
            row = c.execute("SELECT value FROM bench_kv WHERE id = 1").fetchone()
            c.execute("INSERT INTO bench_kv (thread, value) VALUES (?, ?)", (f"hrw{i}", row[0]))
        transaction(work)

    def threaded(fn):
        return lambda i: asyncio.get_running_loop().run_in_executor(pool, fn, i)

    return {"point read": threaded(read), "write (3 statements)": threaded(write),
            "read then write": threaded(read_write)}


def package_ops(url: str, pool: ThreadPoolExecutor) -> dict[str, Callable[[int], Awaitable[object]]] | None:
    try:
        import libsql  # type: ignore[import-not-found]
    except ImportError:
        return None
    import threading

    local = threading.local()
    # one write transaction at a time per process, as our store does: sqld's interactive
    # transactions hold its write lock across round trips, and 16 at once from one process
    # time out there ("Transaction timed out", measured)
    writing = threading.Lock()

    def conn():
        if not hasattr(local, "conn"):
            local.conn = libsql.connect(database=url, isolation_level=None)
        return local.conn

    def read(_: int):
        return conn().execute("SELECT * FROM bench_kv WHERE id = ?", (1,)).fetchone()

    def write(i: int):
        c = conn()
        with writing:
            c.execute("BEGIN IMMEDIATE")
            for n in range(3):
                c.execute("INSERT INTO bench_kv (thread, value) VALUES (?, ?)", (f"p{i}", f"v{n}"))
            c.execute("COMMIT")

    def read_write(i: int):
        c = conn()
        with writing:
            c.execute("BEGIN IMMEDIATE")
            row = c.execute("SELECT value FROM bench_kv WHERE id = 1").fetchone()
            c.execute("INSERT INTO bench_kv (thread, value) VALUES (?, ?)", (f"prw{i}", row[0]))
            c.execute("COMMIT")

    def threaded(fn):
        return lambda i: asyncio.get_running_loop().run_in_executor(pool, fn, i)

    return {"point read": threaded(read), "write (3 statements)": threaded(write),
            "read then write": threaded(read_write)}


async def timed(op: Callable[[int], Awaitable[object]], count: int, concurrency: int) -> tuple[float, float]:
    """(median ms of one operation, operations per second) over ``count`` operations."""
    for i in range(5):
        await op(-i - 1)  # warm up connections
    latencies: list[float] = []
    next_index = 0

    async def loop() -> None:
        nonlocal next_index
        while next_index < count:
            i = next_index
            next_index += 1
            started = time.perf_counter()
            await op(i)
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*[loop() for _ in range(concurrency)])
    return statistics.median(latencies), count / (time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Sqld(Path(tmp) / "sqld") as sqld:
        embedded = LibSQLStore(f"file:{Path(tmp) / 'embedded.db'}")
        remote = RemoteLibSQLStore(sqld.url)
        for store in (embedded, remote):
            await store.open()
            for sql in SETUP:
                await store.run_write(lambda conn, sql=sql: conn.execute(sql))
        pool = ThreadPoolExecutor(16)
        clients = {"embedded file (baseline)": store_ops(embedded),
                   "ours: Hrana over http.client (RemoteLibSQLStore)": store_ops(remote),
                   "Hrana over httpx, same batching": httpx_ops(sqld.url, pool),
                   "libsql package, remote": package_ops(sqld.url, pool)}
        print(f"# libsql server clients, {args.count} operations each\n")
        print("| operation | client | p50 ms (1 at a time) | ops/s (1) | ops/s (16 at once) | ops/s vs baseline (16) |")
        print("|---|---|---:|---:|---:|---:|")
        for name in ("point read", "write (3 statements)", "read then write"):
            base = None
            for client, ops in clients.items():
                if ops is None:
                    print(f"| {name} | {client} | not installed | | | |")
                    continue
                p50, rate1 = await timed(ops[name], args.count, 1)
                _, rate16 = await timed(ops[name], args.count, 16)
                base = base or rate16
                print(f"| {name} | {client} | {p50:.2f} | {rate1:.0f} | {rate16:.0f} | {rate16 / base:.2f} |")
        print(f"\nours: {remote.round_trips} write requests for {remote.transactions} write transactions "
              "(one per transaction that reads nothing, two for one that reads first)")
        for store in (embedded, remote):
            await store.close()
        pool.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
