"""A process's in-memory copy of a resource's vectors, kept current incrementally.

Scoring is one matrix-vector product over every vector of the resource (an exact scan:
recall@k is 1.0 by construction). Reading 100k vectors out of SQLite takes far longer
than scoring them, so each process keeps the matrix of the resources it searched and, per
query, reads only what changed since: vectors with a newer id are appended, and tombstones
newer than the last one seen mark deleted vectors dead (they are compacted away once a
quarter of the rows are dead). Both reads are index range scans of a few rows. Copies are
evicted least-recently-used past ``max_bytes``.

A thread-scoped query uses its resource's matrix with a mask of the thread's rows.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dev_server.storage.message_vectors import VectorIndex

DEFAULT_MAX_BYTES = 512 * 1024 * 1024
THREADED_ROWS = 20_000  # a scan of a larger copy runs in a worker thread, not on the event loop


@dataclass
class _Copy:
    dimensions: int
    vector_id: int = 0  # newest vector id read
    tombstone_id: int = 0  # newest tombstone read
    size: int = 0
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    seqs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    threads: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    alive: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    thread_codes: dict[str, int] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return self.matrix.nbytes + self.ids.nbytes * 2 + self.threads.nbytes + self.alive.nbytes

    def append(self, rows: Sequence[Sequence[Any]]) -> None:
        """Add ``(vector id, message seq, thread id, vector)`` rows; a vector that is not
        ``dimensions`` float32s long is left out (a corrupt row: ``repair`` replaces it)."""
        if not rows:
            return
        ids, seqs, threads, vectors = zip(*rows, strict=True)
        width = self.dimensions * 4
        if any(v is None or len(v) != width for v in vectors):
            keep = [i for i, v in enumerate(vectors) if v is not None and len(v) == width]
            ids, seqs, threads, vectors = ([column[i] for i in keep] for column in (ids, seqs, threads, vectors))
            if not keep:
                return
        count = len(ids)
        need = self.size + count
        if need > len(self.ids):
            capacity = max(need, len(self.ids) + len(self.ids) // 4, 1024)  # a quarter of headroom
            self.matrix = _grow(self.matrix, (capacity, self.dimensions), self.size)
            self.ids, self.seqs = _grow(self.ids, (capacity,), self.size), _grow(self.seqs, (capacity,), self.size)
            self.threads, self.alive = (_grow(self.threads, (capacity,), self.size),
                                        _grow(self.alive, (capacity,), self.size))
        end = self.size + count
        self.matrix[self.size:end] = np.frombuffer(b"".join(vectors), dtype="<f4").reshape(count, self.dimensions)
        self.ids[self.size:end] = ids
        self.seqs[self.size:end] = seqs
        codes = self.thread_codes
        self.threads[self.size:end] = [codes.setdefault(t, len(codes)) for t in threads]
        self.alive[self.size:end] = True
        self.size = end

    def bury(self, vector_ids: list[int]) -> None:
        if vector_ids and self.size:
            self.alive[:self.size] &= ~np.isin(self.ids[:self.size], np.asarray(vector_ids, dtype=np.int64))
            dead = self.size - int(self.alive[:self.size].sum())
            if dead * 4 > self.size:
                keep = np.flatnonzero(self.alive[:self.size])
                self.matrix = self.matrix[keep].copy()
                self.ids, self.seqs, self.threads = self.ids[keep], self.seqs[keep], self.threads[keep]
                self.alive = np.ones(len(keep), dtype=bool)
                self.size = len(keep)

    def top(self, query: np.ndarray, k: int, thread_id: str | None,
            exclude: set[int]) -> list[tuple[int, float]]:
        """Best ``k`` messages (seq, score), a message scored by its best piece. Plain numpy,
        no awaits: the caller runs it in a worker thread for a large copy (the product reads
        the whole matrix; numpy releases the GIL meanwhile)."""
        if not self.size:
            return []
        live = self.alive[:self.size].copy()
        if thread_id is not None:
            code = self.thread_codes.get(thread_id)
            if code is None:
                return []
            live &= self.threads[:self.size] == code
        scores = self.matrix[:self.size] @ query
        scores[~live] = -np.inf
        if exclude:
            scores[np.isin(self.seqs[:self.size], np.fromiter(exclude, dtype=np.int64))] = -np.inf
        wanted = k * 4 + 8  # pieces of one long message may crowd the top: widened until k messages
        while True:
            found = self._best_messages(scores, k, wanted)
            if len(found) == k or wanted >= self.size:
                return found
            wanted *= 4

    def _best_messages(self, scores: np.ndarray, k: int, wanted: int) -> list[tuple[int, float]]:
        wanted = min(wanted, self.size)
        best = np.argpartition(-scores, wanted - 1)[:wanted] if wanted < self.size else np.arange(self.size)
        best = best[np.argsort(-scores[best], kind="stable")]
        found: dict[int, float] = {}
        for row in best:
            if scores[row] == -np.inf or len(found) == k:
                break
            found.setdefault(int(self.seqs[row]), float(scores[row]))
        return list(found.items())


def _grow(array: np.ndarray, shape: tuple[int, ...], used: int) -> np.ndarray:
    grown = np.zeros(shape, dtype=array.dtype)
    if used:
        grown[:used] = array[:used]
    return grown


class VectorCache:
    def __init__(self, index: VectorIndex, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.index = index
        self.max_bytes = max_bytes
        self._copies: OrderedDict[tuple[str, str], _Copy] = OrderedDict()
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def search(self, model: str, dimensions: int, resource_id: str, query: np.ndarray, k: int, *,
                     thread_id: str | None = None, exclude: set[int] | None = None) -> list[tuple[int, float]]:
        key = (model, resource_id)
        async with self._locks.setdefault(key, asyncio.Lock()):
            copy = await self._current(key, dimensions)
            query = np.asarray(query, dtype=np.float32)
            if copy.size < THREADED_ROWS:
                return copy.top(query, k, thread_id, exclude or set())
            return await asyncio.to_thread(copy.top, query, k, thread_id, exclude or set())

    async def _current(self, key: tuple[str, str], dimensions: int) -> _Copy:
        model, resource_id = key
        newest_vector, newest_tombstone, oldest_tombstone = await self.index.positions()
        copy = self._copies.get(key)
        if copy is not None and (copy.dimensions != dimensions or copy.tombstone_id < oldest_tombstone - 1):
            copy = None  # tombstones it has not seen were pruned meanwhile: start over
        if copy is None:
            copy = _Copy(dimensions, tombstone_id=newest_tombstone)
            self._copies[key] = copy
        if newest_tombstone > copy.tombstone_id:
            tombstones = await self.index.tombstones_after(copy.tombstone_id)
            copy.bury([vector_id for _, vector_id in tombstones])
            copy.tombstone_id = max([newest_tombstone, *(t for t, _ in tombstones)])
        if newest_vector > copy.vector_id:
            rows = await self.index.rows_after(model, resource_id, copy.vector_id)
            if len(rows) < THREADED_ROWS:
                copy.append(rows)
            else:  # a first load: building the arrays takes a while, off the event loop
                await asyncio.to_thread(copy.append, rows)
            copy.vector_id = max(newest_vector, rows[-1][0] if rows else 0)
        self._copies.move_to_end(key)
        self._evict()
        return copy

    def _evict(self) -> None:
        while len(self._copies) > 1 and sum(c.nbytes for c in self._copies.values()) > self.max_bytes:
            key, _ = self._copies.popitem(last=False)
            self._locks.pop(key, None)
