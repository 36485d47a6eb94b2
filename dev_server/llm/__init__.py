"""The model seam's implementations: Mastra model ids, litellm behind the kernel's model
protocol (``dev_server.kernel.model``), the local model and embedder, a scripted double.

Importing this package does not import litellm (that costs seconds and, unconfigured,
reaches the network); ``prepare_litellm()`` does it on first use. See docs/architecture.md#decisions.
"""

from dev_server.llm.client import LiteLLMClient
from dev_server.llm.errors import ModelProviderError, translate
from dev_server.llm.models import ModelResolver, split_model_id
from dev_server.llm.offline import ensure_litellm, litellm_ready, prepare_litellm

__all__ = [
    "LiteLLMClient",
    "ModelProviderError",
    "ModelResolver",
    "ensure_litellm",
    "litellm_ready",
    "prepare_litellm",
    "split_model_id",
    "translate",
]
