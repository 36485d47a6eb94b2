"""What the common providers need, known without importing litellm.

litellm's import costs seconds, and a process whose every model answers locally has no use
for it. While none of a provider's variables is set, a model of a provider listed here
cannot be called, and what it lacks is exactly what litellm's ``validate_environment``
would name, in its order; ``dev_server.llm.models`` then answers it from this table, with the same
``ResolvedModel`` (reason, missing variables, who answers) the litellm path gives.
Anything else goes through litellm as before: a provider not listed, one that needs no key
(ollama, vllm, ...), or a listed one with a variable of its own set.

A provider's variables are those whose names start with one of its ``prefixes``: every
name litellm (or ``dev_server.llm.models``) consults to resolve one of its models, aliases
included, so a provider variable of another provider (or ``AWS_CA_BUNDLE`` in a shell)
leaves the answer alone; ``USE_LITELLM_PROXY`` (litellm's switch sending every model to a
litellm proxy) changes every answer. Keyed by litellm's provider prefix (Mastra's ``google`` is
litellm's ``gemini``). Left out on purpose, because litellm's answer for them depends on the
model: ``azure/`` (litellm sends its non-OpenAI models to the OpenAI route) and ``cohere/``
(its chat models take a route that checks no key); ``other_routes`` names the few ids of a
listed provider that litellm routes elsewhere. tests/test_lazy_litellm.py compares every
entry with litellm's own answer for every model litellm's model map lists under it, and
checks that the prefixes cover every variable litellm reads for it, so the table cannot
drift from the installed litellm unnoticed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class KnownProvider:
    required: tuple[str, ...]  # what litellm names as missing when none of the provider's variables is set
    prefixes: tuple[str, ...]  # the provider's variables: every name that may change that answer
    other_routes: frozenset[str] = frozenset()  # model ids litellm sends to another route: its to answer


def _known(required: str | tuple[str, ...], *prefixes: str, other_routes: frozenset[str] = frozenset()
           ) -> KnownProvider:
    names = (required,) if isinstance(required, str) else required
    return KnownProvider(names, prefixes, other_routes)


KNOWN_PROVIDERS: Mapping[str, KnownProvider] = MappingProxyType({
    "openai": _known("OPENAI_API_KEY", "OPENAI_"),
    # Anthropic's legacy text models take litellm's anthropic_text route, which checks no key.
    "anthropic": _known("ANTHROPIC_API_KEY", "ANTHROPIC_", other_routes=frozenset({"claude-2", "claude-instant-1"})),
    "gemini": _known(("GOOGLE_API_KEY", "GEMINI_API_KEY"), "GEMINI_", "GOOGLE_"),
    "groq": _known("GROQ_API_KEY", "GROQ_"),
    "mistral": _known("MISTRAL_API_KEY", "MISTRAL_"),
    "deepseek": _known("DEEPSEEK_API_KEY", "DEEPSEEK_"),
    "xai": _known("XAI_API_KEY", "XAI_"),
    "openrouter": _known("OPENROUTER_API_KEY", "OPENROUTER_", "OR_"),
    "together_ai": _known("TOGETHERAI_API_KEY", "TOGETHER"),
    "perplexity": _known("PERPLEXITYAI_API_KEY", "PERPLEXITY"),
    "fireworks_ai": _known("FIREWORKS_AI_API_KEY", "FIREWORKS"),
    "cerebras": _known("CEREBRAS_API_KEY", "CEREBRAS_"),
    "deepinfra": _known("DEEPINFRA_API_KEY", "DEEPINFRA_"),
    "huggingface": _known("HUGGINGFACE_API_KEY", "HUGGINGFACE_", "HF_"),
    "replicate": _known("REPLICATE_API_KEY", "REPLICATE_"),
    "nvidia_nim": _known("NVIDIA_NIM_API_KEY", "NVIDIA_"),
    "moonshot": _known("MOONSHOT_API_KEY", "MOONSHOT_"),
    "bedrock": _known(("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"), "AWS_", "BEDROCK_"),
    "vertex_ai": _known(("VERTEXAI_PROJECT", "VERTEXAI_LOCATION"), "VERTEX", "GOOGLE_"),
})


# Names that change every provider's answer.
EVERY_PROVIDER = ("USE_LITELLM_PROXY",)


def required_variables(litellm_provider: str, model_id: str, environ: Mapping[str, str] | None
                       ) -> tuple[str, ...] | None:
    """What a model of ``litellm_provider`` lacks, when that is known without litellm: a
    provider of the table and none of its variables in ``environ`` (None: not looked at,
    every model is forced local anyway). Else None: only litellm can say."""
    known = KNOWN_PROVIDERS.get(litellm_provider)
    if known is None or model_id in known.other_routes:
        return None
    if environ and any(name.startswith(known.prefixes) or name in EVERY_PROVIDER for name in environ):
        return None
    return known.required
