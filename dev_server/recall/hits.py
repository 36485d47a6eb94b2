"""What a semantic search returns, and why it may not answer."""

from __future__ import annotations

from dataclasses import dataclass

from dev_server.kernel.messages import Message


@dataclass(frozen=True)
class SemanticHit:
    message: Message
    score: float  # cosine similarity, -1..1 (1 = same direction)
    thread_title: str = ""


class SemanticSearchUnavailable(Exception):
    """No vector search here: no embedder configured for this memory, or the embedder
    failed (provider down). Callers fall back (FTS) or go on without recall."""
