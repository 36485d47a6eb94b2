"""Mastra model ids -> litellm model names, and the local fallback rule.

Mastra names a model ``provider/model``; litellm uses the same shape with its own provider
prefixes (only Google differs: Mastra's ``google`` is litellm's ``gemini``). The rest of the
id is passed through untouched, so ``openrouter/meta-llama/llama-3-8b`` keeps its slashes.

A provider is only called when its API key is present. Keys are read from the environment
(``os.environ`` unless a mapping is injected), which is litellm's own convention and the
one every provider SDK documents, so this is the one place outside ``app.settings`` that
looks at environment variables. Without a key, or with ``force_local``, the built-in
deterministic local model answers instead (``local/...``), so a checkout with no keys
works offline. Keys are looked up here and handed to litellm per call; they never appear
in a ``ResolvedModel``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.llm.types import ResolvedModel

LOCAL_PROVIDER = "local"


@dataclass(frozen=True)
class Provider:
    litellm_prefix: str
    key_env: tuple[str, ...]  # first one set wins


PROVIDERS: Mapping[str, Provider] = {
    "openai": Provider("openai", ("OPENAI_API_KEY",)),
    "anthropic": Provider("anthropic", ("ANTHROPIC_API_KEY",)),
    "google": Provider("gemini", ("GOOGLE_GENERATIVE_AI_API_KEY", "GEMINI_API_KEY")),
    "groq": Provider("groq", ("GROQ_API_KEY",)),
    "mistral": Provider("mistral", ("MISTRAL_API_KEY",)),
    "deepseek": Provider("deepseek", ("DEEPSEEK_API_KEY",)),
    "xai": Provider("xai", ("XAI_API_KEY",)),
    "openrouter": Provider("openrouter", ("OPENROUTER_API_KEY",)),
}


def split_model_id(mastra_id: str) -> tuple[str, str]:
    """``"openai/gpt-4o"`` -> ``("openai", "gpt-4o")``; ValueError if a part is missing."""
    provider, slash, model_id = mastra_id.strip().partition("/")
    if not slash or not provider or not model_id.strip("/"):
        raise ValueError(f"model id must look like 'provider/model', got {mastra_id!r}")
    return provider.lower(), model_id


def api_key_for(provider: str, environ: Mapping[str, str]) -> str | None:
    """The provider's API key from ``environ``, or None (also for unknown providers)."""
    spec = PROVIDERS.get(provider)
    if spec is None:
        return None
    for name in spec.key_env:
        value = environ.get(name, "").strip()
        if value:
            return value
    return None


def resolve_model(mastra_id: str, *, environ: Mapping[str, str], force_local: bool = False) -> ResolvedModel:
    """Decide where ``mastra_id`` goes. Raises ValueError for a malformed or unknown id."""
    provider, model_id = split_model_id(mastra_id)
    canonical = f"{provider}/{model_id}"
    if provider == LOCAL_PROVIDER:
        return ResolvedModel(canonical, provider, model_id, f"{LOCAL_PROVIDER}/{model_id}", True)
    spec = PROVIDERS.get(provider)
    if spec is None:
        known = ", ".join(sorted([*PROVIDERS, LOCAL_PROVIDER]))
        raise ValueError(f"unknown model provider {provider!r} (known: {known})")
    if force_local or api_key_for(provider, environ) is None:
        # The local model stands in for the requested one; keep the original id visible.
        return ResolvedModel(canonical, provider, model_id, f"{LOCAL_PROVIDER}/{canonical}", True)
    return ResolvedModel(canonical, provider, model_id, f"{spec.litellm_prefix}/{model_id}", False)
