"""WAL checkpoints off the writer's path.

In WAL mode a commit appends pages to the ``-wal`` file, and SQLite copies them back into
the database file (a checkpoint) once the WAL holds 1,000 pages, on the connection whose
commit crossed that line, before that commit returns. A checkpoint syncs both files
(``synchronous = NORMAL`` syncs nothing else), and an fsync on a busy disk took 2 ms at the
median and up to 76 ms here: every write queued behind that commit waited for it (p99 of a
thread creation 100 ms, measured with 8 writers in one process).

So the writer turns automatic checkpoints off (``wal_autocheckpoint = 0``) and this runs
them on a connection and a thread of its own: a ``PASSIVE`` checkpoint, which never blocks
a reader or a writer (the writer keeps appending to the WAL meanwhile), ``delay_s`` after
the first commit since the last one, so the WAL holds at most that long of writes beyond
what a checkpoint could not copy yet (a frame newer than what a reader still reads waits
for the next). Durability is unchanged: a committed transaction is in the WAL either way.

A passive checkpoint never shortens the WAL: SQLite writes it again from its start only
when a writer begins while every frame has been copied back, and under steady load a commit
nearly always lands between a checkpoint and the next write. Measured: 300 turns a minute on
one thread grew a 13 MB database's WAL to 153 MB, and it grows for as long as the load
lasts. So once the WAL holds more than ``WAL_LIMIT_BYTES`` of pages, the checkpointer also asks for
a ``RESTART`` checkpoint without waiting (its connection's busy timeout is 0): it holds the
write lock while it copies the few frames the passive one left and syncs, so that the next
write starts the WAL from its beginning, unless a reader is still in it (then it gives up
and the next round tries again). The writer then cuts the file back to ``journal_size_limit``
(``dev_server.storage.libsql``). Writing over the start of the file again cost the writer
less than the growing file did (0.71 against 0.78 ms of its CPU a turn, in-process, 10,000-
message thread); a ``TRUNCATE`` checkpoint, which empties the file, cost as much as before.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_DELAY_S = 0.1
WAL_LIMIT_BYTES = 16 << 20  # also the WAL file's size once it starts again (libsql's journal_size_limit)


class Checkpointer:
    def __init__(self, target: Path | str, *, delay_s: float = DEFAULT_DELAY_S) -> None:
        self.target = str(target)
        self.delay_s = delay_s
        self._thread: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._limit_frames = 0  # WAL_LIMIT_BYTES in the database's pages
        self._due: asyncio.TimerHandle | None = None
        self.runs = 0  # checkpoints run (for /health)
        self.restarts = 0  # ... of which let the next write start the WAL again

    async def open(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-checkpoint")
        loop = asyncio.get_running_loop()
        self._conn = await loop.run_in_executor(self._thread, self._connect)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.target, isolation_level=None)
        # a passive checkpoint never waits; a restarting one must not make a writer wait long
        conn.execute("PRAGMA busy_timeout = 0")
        self._limit_frames = WAL_LIMIT_BYTES // conn.execute("PRAGMA page_size").fetchone()[0]
        return conn

    def committed(self) -> None:
        """A write committed: a checkpoint runs ``delay_s`` from the first such since the last."""
        if self._due is None and self._thread is not None:
            self._due = asyncio.get_running_loop().call_later(self.delay_s, self._start)

    def _start(self) -> None:
        self._due = None
        if self._thread is not None:
            self._thread.submit(self._checkpoint)

    def _checkpoint(self) -> None:
        if self._conn is None:
            return
        try:
            _, frames, _ = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            self.runs += 1
            if frames > self._limit_frames:
                busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
                if not busy:  # busy: a reader was still in the WAL, and the next round tries again
                    self.restarts += 1
        except sqlite3.Error as exc:  # another process's checkpoint, say: the next one catches up
            log.debug("WAL checkpoint skipped: %s", exc)

    async def close(self) -> None:
        if self._due is not None:
            self._due.cancel()
            self._due = None
        thread, self._thread = self._thread, None
        if thread is None:
            return
        conn, self._conn = self._conn, None
        if conn is not None:
            await asyncio.get_running_loop().run_in_executor(thread, conn.close)
        thread.shutdown(wait=True)
