"""The model seam: Mastra model ids, litellm behind a small protocol, the local model.

Importing this package does not import litellm (that costs seconds and, unconfigured,
reaches the network); ``prepare_litellm()`` does it on first use. See the design notes decision 8.
"""

from dev_server.llm.client import LiteLLMClient, LLMClient
from dev_server.llm.errors import ModelProviderError, translate
from dev_server.llm.models import ModelResolver, split_model_id
from dev_server.llm.offline import ensure_litellm, litellm_ready, prepare_litellm
from dev_server.llm.types import (Finish, ModelRequest, ReasoningDelta, ResolvedModel, TextDelta, ToolCall, ToolCallDelta,
                           Usage)

__all__ = [
    "Finish",
    "LLMClient",
    "LiteLLMClient",
    "ModelProviderError",
    "ModelRequest",
    "ModelResolver",
    "ReasoningDelta",
    "ResolvedModel",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "Usage",
    "ensure_litellm",
    "litellm_ready",
    "prepare_litellm",
    "split_model_id",
    "translate",
]
