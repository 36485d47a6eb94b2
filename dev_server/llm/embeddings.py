"""Embeddings, the third call of the model seam beside ``stream`` and ``complete``.

``Embedder.embed(texts)`` gives one unit vector per text (a float32 matrix). Which model
embeds follows the chat models' rule (``dev_server.llm.models``): a Mastra id
(``openai/text-embedding-3-small``, ``google/gemini-embedding-001``, ...) goes to its
provider through ``litellm.aembedding`` when the provider's variables are set, else the
built-in local embedder (``dev_server.llm.local_embedder``, a real MiniLM model on the CPU)
answers, and says so (``is_local``, ``answeredBy`` in ``/health`` and ``/memory/config``).

Provider calls are batched (``PROVIDER_BATCH`` texts a request), bounded by the settings'
timeout, and retried like a chat call (connection, rate limit and 5xx errors, with
backoff); a failure raises ``ModelProviderError``. Vectors are L2-normalised here whatever
the provider returns, so the index scores every model by a dot product.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from dev_server.kernel.model import Embedder, ResolvedModel
from dev_server.llm.errors import ModelProviderError, at_endpoint, translate
from dev_server.llm.local_embedder import LocalEmbedder

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

DEFAULT_EMBEDDER = "openai/text-embedding-3-small"
PROVIDER_BATCH = 96
PROVIDER_CHUNK_CHARS = 6000  # well under the 8k-token input of the providers' embedding models
_RETRYABLE = frozenset({"connection", "rate_limit", "provider"})
_BACKOFF_S = 0.25


def normalized(matrix: Any) -> np.ndarray:
    import numpy as np

    matrix = np.asarray(matrix, dtype=np.float32)
    return matrix / np.clip(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12, None)


class ProviderEmbedder:
    """An embedding model of a provider, through litellm."""

    is_local = False
    chunk_chars = PROVIDER_CHUNK_CHARS

    def __init__(self, resolved: ResolvedModel, litellm: Any, credentials: dict[str, Any], *,
                 timeout_s: float, retries: int, extra_kwargs: dict[str, Any] | None = None,
                 endpoint: str | None = None) -> None:
        self.id = resolved.mastra_id
        self.answered_by = resolved.litellm_model
        self._litellm = litellm
        self._kwargs = {**credentials, "timeout": timeout_s, "max_retries": 0, **(extra_kwargs or {})}
        self._retries = retries
        self._endpoint = endpoint  # named in a connection error's message
        self._dimensions: int | None = None

    @property
    def dimensions(self) -> int | None:
        """Known after the first call (providers differ, and a model may be configured)."""
        return self._dimensions

    @property
    def key(self) -> str:
        """The model alone: known before the first call, and a configured model has one size."""
        return self.answered_by

    async def prepare(self) -> None:
        """Nothing to check before the first call (a provider that is down now may be up then)."""

    async def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        parts = [await self._call(texts[start:start + PROVIDER_BATCH])
                 for start in range(0, len(texts), PROVIDER_BATCH)]
        if not parts:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        matrix = normalized(np.vstack(parts))
        self._dimensions = int(matrix.shape[1])
        return matrix

    async def _call(self, batch: list[str]) -> np.ndarray:
        import numpy as np

        for attempt in range(self._retries + 1):
            try:
                response = await self._litellm.aembedding(model=self.answered_by, input=batch, **self._kwargs)
                rows = sorted(response.data, key=lambda item: _field(item, "index"))
                return np.array([_field(item, "embedding") for item in rows], dtype=np.float32)
            except Exception as exc:  # the provider's fault, in our error kinds
                error = translate(exc)
                if attempt == self._retries or error.kind not in _RETRYABLE:
                    raise at_endpoint(error, self._endpoint) from exc
                log.info("embedding call failed (%s), retry %d of %d", error.kind, attempt + 1, self._retries)
                await asyncio.sleep(_BACKOFF_S * 2 ** attempt)
        raise ModelProviderError(502, "provider", "embedding failed")  # not reached


def _field(item: Any, name: str) -> Any:
    return item[name] if isinstance(item, dict) else getattr(item, name)


def describe(embedder: Embedder | None) -> dict[str, Any] | None:
    """What ``/health`` and ``/memory/config`` report of an embedder."""
    if embedder is None:
        return None
    return {"model": embedder.id, "answeredBy": embedder.answered_by, "local": embedder.is_local,
            "dimensions": embedder.dimensions, "key": embedder.key}


_local: LocalEmbedder | None = None


def local_embedder() -> LocalEmbedder:
    """The process's one local embedder (its session is loaded once)."""
    global _local
    if _local is None:
        _local = LocalEmbedder()
    return _local
