"""Defaults for the parts of ``LLMClient`` (``dev_server.kernel.model``) a simple client has no use for.

A client that only answers calls (the scripted model of the tests, a benchmark's instant
model) subclasses ``ModelClientBase`` and writes ``resolve`` and ``stream``: it then needs
no warm-up and holds nothing to close, reports itself ready when litellm is, and embeds
with the built-in local model. ``LiteLLMClient`` writes all of them itself.
"""

from __future__ import annotations

from typing import Any

from dev_server.kernel.model import Embedder
from dev_server.llm.embeddings import local_embedder
from dev_server.llm.offline import litellm_ready


class ModelClientBase:
    """``LLMClient``'s defaults; a subclass writes ``resolve`` and ``stream``."""

    async def warm_up(self) -> None:
        return None

    def status(self) -> dict[str, Any]:
        return {"ready": litellm_ready()}

    async def embedder(self, mastra_id: str) -> Embedder:
        return local_embedder()

    def embeds_locally(self, mastra_id: str) -> bool | None:
        return True

    async def aclose(self) -> None:
        return None
