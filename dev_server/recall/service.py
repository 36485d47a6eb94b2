"""Semantic recall of one process: the embedder, the index, where it is searched, the indexer.

Built once by the app and shared by every memory that has semantic recall
(``DEV_SERVER_SEMANTIC_RECALL``, or the agent's own options) or OM retrieval with vectors;
it embeds and searches the messages of those agents only (``agents``). The lifespan starts
and stops its indexer. ``search`` embeds the query with the same model as the index and
returns the nearest messages of a thread or a resource; ``SemanticSearchUnavailable`` when
the embedder fails (counted in ``/health``), so the caller goes on without recall.

Where a search runs: on the embedded file, in this process's copy of the resource's vectors
(``recall.matrix``); on a libsql server with vector functions, in the server's own vector
index (``storage.native_vectors``), once it holds every vector (until then, and on the
embedded file, the copy). The server's index is filled from vectors stored before it
existed in the background, a chunk at a time (``_build_native``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from dev_server.kernel.clock import SYSTEM_CLOCK, Clock
from dev_server.kernel.model import Embedder
from dev_server.kernel.ports import SemanticHit, SemanticSearchUnavailable
from dev_server.llm.embeddings import describe
from dev_server.recall.indexer import POLL_S, Indexer
from dev_server.recall.matrix import VectorCache
from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.message_vectors import VectorIndex, message_seqs, messages_by_seq
from dev_server.storage.native_vectors import NativeVectors, supported

log = logging.getLogger(__name__)

QUERY_TIMEOUT_S = 10.0


@dataclass
class QueryStats:
    queries: int = 0
    failures: int = 0
    last_error: str | None = None


class SemanticIndex:
    """``embedder`` is an ``Embedder`` or an async factory of one: the app resolves its
    embedder in the background (that may import litellm), so start-up does not wait."""

    def __init__(self, db: LibSQLStore, embedder: Embedder | Callable[[], Awaitable[Embedder]], *,
                 agents: frozenset[str], poll_s: float = POLL_S, requested: str | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.db = db
        self.requested = requested  # the configured Mastra id (the local embedder may stand in for it)
        self._factory = embedder if callable(embedder) and not hasattr(embedder, "embed") else None
        self.embedder: Embedder | None = None if self._factory is not None else embedder  # type: ignore[assignment]
        self.poll_s = poll_s
        self.index = VectorIndex(db, agents=agents, clock=clock)
        self.cache = VectorCache(self.index)
        self.native: NativeVectors | None = None  # set once the server's vector index is complete
        self.native_backlog: int | None = None  # vectors still to index there (None: not a server with one)
        self._server_index = False  # the database has libsql's vector functions
        self._native_build: asyncio.Task | None = None
        self.indexer: Indexer | None = None
        self.queries = QueryStats()
        self.error: str | None = None
        self._starting: asyncio.Task | None = None

    async def start(self) -> None:
        """Resolve the embedder, repair the index and start the indexer, in the background."""
        if self._starting is None:
            self._starting = asyncio.create_task(self._start(), name="semantic-index-start")

    async def _start(self) -> None:
        try:
            if self.embedder is None:
                self.embedder = await self._factory()
            await self.embedder.prepare()  # the local model's file is checked here, once
            indexer = Indexer(self.index, self.embedder, poll_s=self.poll_s)
            await indexer.start()  # repairs the index first: /health says ready only after that
            self.indexer = indexer
            self._server_index = await supported(self.db)
            if self._server_index and self.embedder.dimensions:
                self._start_native(self.embedder.dimensions)
        except Exception as exc:  # recall stays off in this process; /health says why
            self.error = f"{type(exc).__name__}: {exc}"[:500]
            log.warning("semantic recall unavailable: %s", self.error)

    def _start_native(self, dims: int) -> None:
        """Build the server's vector index in the background (a provider embedder's
        dimensions are known after its first call: then at the first search)."""
        if self._native_build is None:
            self._native_build = asyncio.create_task(self._build_native(dims), name="semantic-index-server")

    async def _build_native(self, dims: int) -> None:
        """Make the server's vector index for ``dims`` and fill it with what was stored before
        it existed, a chunk per transaction; searches use it once it is complete."""
        try:
            native = NativeVectors(self.db, agents=self.index.agents)
            await native.ensure(dims)
            self.native_backlog = await native.unindexed(dims)
            if self.native_backlog:
                log.info("semantic recall: indexing %d vectors in the database server", self.native_backlog)
            after = 0
            while self.native_backlog:  # a cursor over the ids: each chunk reads only its own rows
                done, moved = await native.fill(dims, after)
                if moved == after:  # nothing after the cursor (what is left was deleted meanwhile)
                    break
                after, self.native_backlog = moved, max(0, self.native_backlog - done)
            self.native_backlog = 0
            native.dims, self.native = dims, native
        except Exception as exc:  # searches go on in this process's copy
            log.warning("semantic recall: the database server's vector index is unavailable: %s: %s",
                        type(exc).__name__, exc)

    async def ready(self, timeout_s: float = 60.0) -> bool:
        """Wait for the start (tests, the benchmark); True when the indexer runs."""
        await self.start()
        async with asyncio.timeout(timeout_s):
            await asyncio.shield(self._starting)
            if self._native_build is not None:  # the server's index too, where there is one
                await asyncio.shield(self._native_build)
        return self.indexer is not None

    async def stop(self) -> None:
        for task in (self._starting, self._native_build):
            if task is not None and not task.done():
                task.cancel()
        if self.indexer is not None:
            await self.indexer.stop()

    def saved(self) -> None:
        """Messages were written: the indexer looks at the queue now."""
        if self.indexer is not None:
            self.indexer.nudge()

    async def embed_query(self, text: str) -> Any:
        if self.embedder is None or self.indexer is None:
            raise SemanticSearchUnavailable(self.error or "semantic recall is starting")
        try:
            async with asyncio.timeout(QUERY_TIMEOUT_S):
                return (await self.embedder.embed([text]))[0]
        except Exception as exc:
            self.queries.failures += 1
            self.queries.last_error = f"{type(exc).__name__}: {exc}"[:500]
            raise SemanticSearchUnavailable(f"the embedder failed: {self.queries.last_error}") from exc

    async def search(self, query: str, *, resource_id: str, thread_id: str | None = None, top_k: int = 4,
                     exclude_ids: Iterable[str] = (), threshold: float | None = None) -> list[SemanticHit]:
        """Nearest messages, best first, of the thread or of the whole resource."""
        self.queries.queries += 1
        vector = await self.embed_query(query)
        return await self.search_vector(vector, resource_id=resource_id, thread_id=thread_id, top_k=top_k,
                                        exclude_ids=exclude_ids, threshold=threshold)

    async def search_vector(self, vector: Any, *, resource_id: str, thread_id: str | None = None, top_k: int = 4,
                            exclude_ids: Iterable[str] = (), threshold: float | None = None) -> list[SemanticHit]:
        excluded_seqs = await message_seqs(self.db, list(set(exclude_ids)))
        if self.embedder is None:
            raise SemanticSearchUnavailable(self.error or "semantic recall is starting")
        if self.native is not None and self.native.dims == len(vector):
            found = await self.native.nearest(self.embedder.key, vector, top_k, resource_id=resource_id,
                                              thread_id=thread_id, exclude=excluded_seqs)
        else:
            if self._server_index:
                self._start_native(len(vector))
            found = await self.cache.search(self.embedder.key, len(vector), resource_id, vector, top_k,
                                            thread_id=thread_id, exclude=excluded_seqs)
        if threshold is not None:
            found = [(seq, score) for seq, score in found if score >= threshold]
        messages = await messages_by_seq(self.db, [seq for seq, _ in found], resource_id)
        return [SemanticHit(messages[seq][0], score, messages[seq][1]) for seq, score in found if seq in messages]

    def describe(self) -> dict[str, Any] | None:
        described = describe(self.embedder)
        if described is not None and self.requested:
            described["model"] = self.requested
        return described

    async def health(self) -> dict[str, Any]:
        index = await self.indexer.stats() if self.indexer is not None else {"running": False}
        index["searchedIn"] = "server" if self.native is not None else "process"
        if self.native_backlog is not None:
            index["serverBacklog"] = self.native_backlog
        return {"ready": self.indexer is not None, "error": self.error, "embedder": self.describe(), "index": index,
                "queries": {"total": self.queries.queries, "failures": self.queries.failures,
                            "lastError": self.queries.last_error}}
