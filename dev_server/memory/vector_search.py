"""A memory's search by meaning: the kernel's ``SemanticSearch`` port over the process's
semantic index (``dev_server.recall.service``), or over none when no agent of the process
searches by meaning (every search is then ``SemanticSearchUnavailable``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from dev_server.kernel.ports import SemanticHit, SemanticSearchUnavailable

if TYPE_CHECKING:
    from dev_server.recall.service import SemanticIndex


class VectorSearch:
    def __init__(self, index: SemanticIndex | None) -> None:
        self.index = index

    async def search(self, query: str, *, resource_id: str, thread_id: str | None = None, top_k: int = 4,
                     exclude_ids: Iterable[str] = (), threshold: float | None = None) -> list[SemanticHit]:
        """The stored messages nearest to ``query`` by meaning, best first: of the thread, or
        of every thread of ``resource_id`` when ``thread_id`` is None (the caller has checked
        that the resource is the caller's), without ``exclude_ids``."""
        if self.index is None:
            raise SemanticSearchUnavailable("semantic search is not configured for this memory")
        return await self.index.search(query, resource_id=resource_id, thread_id=thread_id, top_k=top_k,
                                       exclude_ids=exclude_ids, threshold=threshold)

    def saved(self) -> None:
        """Messages were written: the indexer (if any) embeds them soon, not at its next poll."""
        if self.index is not None:
            self.index.saved()
