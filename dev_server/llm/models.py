"""Mastra model ids -> litellm models, and which model will really answer (and why).

Mastra names a model ``provider/model``; litellm uses the same shape with its own provider
prefixes (only Google differs: Mastra's ``google`` is litellm's ``gemini``). Every provider
litellm knows is accepted (``ollama/``, ``azure/``, ``bedrock/``, ``vertex_ai/``,
``openrouter/``, ``groq/``, ...); the rest of the id is passed through untouched, so
``openrouter/meta-llama/llama-3-8b`` keeps its slashes. ``local/...`` is the built-in model.

Which variables a provider needs comes from litellm itself: ``get_llm_provider`` (the
provider, its default base URL, a key that is not a secret such as vLLM's) and
``validate_environment`` (the required variable names). ``validate_environment`` reads
``os.environ``; we evaluate the same function against the provider variables the settings
collected (the environment *and* the ``.env``), so ``.env`` keys count, and an injected
mapping is the whole truth in tests. A provider that needs nothing (ollama at its default
``http://localhost:11434``) is called directly.

Without litellm: while none of its variables is set, what a common provider needs comes
from a small table (``dev_server.llm.known_providers``) instead, so a process whose models all
answer locally never imports litellm; everything else needs litellm attached first
(``needs_litellm`` says when, ``attach`` gives it).

A provider is called when nothing it needs is missing. Otherwise the built-in local model
answers (``local_fallback``), or, with the fallback off, the turn fails with a 503
``not_configured`` error naming the missing variables. Keys are handed to litellm per call
(``call_kwargs``) and never appear in a ``ResolvedModel``.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from dev_server.kernel.model import ResolvedModel
from dev_server.llm.errors import ModelProviderError
from dev_server.llm.known_providers import KNOWN_PROVIDERS, required_variables
from dev_server.llm.offline import prepare_litellm

LOCAL_PROVIDER = "local"
_LITELLM_PREFIX = {"google": "gemini"}
# Mastra's name for the Gemini key, which litellm does not read.
_KEY_ALIASES = {"GEMINI_API_KEY": "GOOGLE_GENERATIVE_AI_API_KEY"}
# Variables litellm takes as call arguments instead of reading them from os.environ.
_CALL_ARGS: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "aws": (("aws_access_key_id", "AWS_ACCESS_KEY_ID"), ("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY"),
            ("aws_session_token", "AWS_SESSION_TOKEN"), ("aws_profile_name", "AWS_PROFILE"),
            ("aws_region_name", "AWS_REGION_NAME", "AWS_REGION", "AWS_DEFAULT_REGION")),
    "vertex_ai": (("vertex_project", "VERTEXAI_PROJECT", "VERTEX_PROJECT", "GOOGLE_CLOUD_PROJECT"),
                  ("vertex_location", "VERTEXAI_LOCATION", "VERTEX_LOCATION"),
                  ("vertex_credentials", "VERTEXAI_CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS")),
}
_AWS_PROVIDERS = {"bedrock", "sagemaker", "bedrock_converse"}


def split_model_id(mastra_id: str) -> tuple[str, str]:
    """``"openai/gpt-4o"`` -> ``("openai", "gpt-4o")``; ValueError if a part is missing."""
    provider, slash, model_id = mastra_id.strip().partition("/")
    if not slash or not provider or not model_id.strip("/"):
        raise ValueError(f"model id must look like 'provider/model', got {mastra_id!r}")
    return provider.lower(), model_id


def check_model_id(mastra_id: str) -> None:
    """ValueError (one line) unless ``mastra_id`` is ``provider/model`` with a provider this
    server can call: ``local``, a provider of ``dev_server.llm.known_providers`` (known
    without litellm), or one litellm knows, asked exactly as a turn would ask it. litellm is
    imported for that last case only, and such a model needs it anyway. The model's own name
    is not checked: an OpenAI-compatible server (``OPENAI_BASE_URL``), ollama or OpenRouter
    serve names no registry lists, and litellm's map trails every provider's new models."""
    provider, model_id = split_model_id(mastra_id)
    prefix = _LITELLM_PREFIX.get(provider, provider)
    if provider == LOCAL_PROVIDER or prefix in KNOWN_PROVIDERS:
        return
    try:
        prepare_litellm().get_llm_provider(f"{prefix}/{model_id}")
    except Exception:
        raise ValueError(f"unknown model provider {provider!r} in {mastra_id!r} (litellm does not know it; "
                         "ids look like 'openai/gpt-4o-mini', 'anthropic/...', 'ollama/...')") from None


def _isolated(function: Any, environ: Mapping[str, str]) -> Any:
    """``function`` with ``os.environ`` inside it replaced by ``environ`` (a copy of the
    function, so nothing process-wide changes; ``validate_environment`` only tests
    membership in ``os.environ``)."""
    scope = {**function.__globals__, "os": types.SimpleNamespace(environ=environ)}
    copy = types.FunctionType(function.__code__, scope, function.__name__, function.__defaults__,
                              function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    return copy


def shown_url(url: str) -> str:
    """``url`` safe to show: scheme, host, port and path (no user, password, query or fragment)."""
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.hostname:
        return "(not a URL)"
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _first(environ: Mapping[str, str], names: Any) -> str | None:
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return value
    return None


class ModelResolver:
    """Decides, once per model id, where a Mastra model id goes. ``litellm`` may be None
    (not imported yet): ids it is needed for are refused until ``attach`` gives it."""

    def __init__(self, litellm: Any | None, environ: Mapping[str, str], *, force_local: bool = False,
                 fallback: bool = True) -> None:
        env = {k: v for k, v in environ.items() if isinstance(v, str) and v.strip()}
        for name, alias in _KEY_ALIASES.items():
            if name not in env and alias in env:
                env[name] = env[alias]
        self._env = env
        self._force_local = force_local
        self._fallback = fallback
        self._litellm: Any | None = None
        self._plans: dict[str, tuple[ResolvedModel, dict[str, Any], str | None]] = {}
        if litellm is not None:
            self.attach(litellm)

    def attach(self, litellm: Any) -> None:
        """Give the resolver litellm (idempotent)."""
        if self._litellm is None:
            self._validate = _isolated(litellm.validate_environment, self._env)
            self._required = _isolated(litellm.validate_environment, {})
            self._litellm = litellm

    def needs_litellm(self, mastra_id: str) -> bool:
        """Whether ``plan(mastra_id)`` needs litellm, which is not attached yet."""
        if self._litellm is not None or mastra_id in self._plans:
            return False
        try:
            provider, model_id = split_model_id(mastra_id)
        except ValueError:  # malformed: refused without litellm
            return False
        return provider != LOCAL_PROVIDER and self._known_missing(provider, model_id) is None

    def plan(self, mastra_id: str) -> ResolvedModel:
        """Where ``mastra_id`` goes; never raises for configuration (``missing`` says what
        is not set). ValueError for a malformed id or a provider litellm does not know."""
        return self._planned(mastra_id)[0]

    def resolve(self, mastra_id: str) -> ResolvedModel:
        """``plan``, but a model that cannot be called with the fallback off raises a 503."""
        resolved = self.plan(mastra_id)
        if resolved.missing and not resolved.is_local:
            raise ModelProviderError(
                503, "not_configured",
                f"The model {resolved.mastra_id} is not configured: {_names(resolved.missing)} not set "
                "(DEV_SERVER_LOCAL_FALLBACK=false)")
        return resolved

    def call_kwargs(self, resolved: ResolvedModel) -> dict[str, Any]:
        """Credentials and base URL for a call to ``resolved`` (empty for the local model)."""
        if resolved.is_local:
            return {}
        return dict(self._planned(resolved.mastra_id)[1])

    def endpoint(self, resolved: ResolvedModel) -> str | None:
        """Where a call to ``resolved`` connects, for the message of a connection error: the
        base URL a variable sets, with the variable's name, else the provider's default base
        URL when litellm names one (ollama's); never credentials, query or fragment. None for
        the local model, or when only the provider's SDK knows (OpenAI's own API)."""
        return None if resolved.is_local else self._planned(resolved.mastra_id)[2]

    def _planned(self, mastra_id: str) -> tuple[ResolvedModel, dict[str, Any], str | None]:
        cached = self._plans.get(mastra_id)
        if cached is None:
            cached = self._plans[mastra_id] = self._decide(mastra_id)
        return cached

    def _known_missing(self, provider: str, model_id: str) -> tuple[str, ...] | None:
        """What the provider lacks, when that is known without litellm: a provider of the
        table with none of its variables set (or every model forced local anyway)."""
        return required_variables(_LITELLM_PREFIX.get(provider, provider), model_id,
                                  None if self._force_local else self._env)

    def _decide(self, mastra_id: str) -> tuple[ResolvedModel, dict[str, Any], str | None]:
        provider, model_id = split_model_id(mastra_id)
        canonical = f"{provider}/{model_id}"
        if provider == LOCAL_PROVIDER:
            return _local(canonical, provider, model_id, f"asked for {canonical}", direct=True), {}, None
        litellm_model = f"{_LITELLM_PREFIX.get(provider, provider)}/{model_id}"
        known_missing = self._known_missing(provider, model_id)
        lookup = None if known_missing is not None else self._provider_of(mastra_id, provider, litellm_model)
        if self._force_local:
            return _local(canonical, provider, model_id, "DEV_SERVER_LOCAL_MODEL_ONLY=true"), {}, None
        missing, kwargs, endpoint = ((known_missing, {}, None) if lookup is None
                                     else self._configuration(litellm_model, *lookup))
        if missing:
            reason = f"{_names(missing)} not set"
            if self._fallback:
                return _local(canonical, provider, model_id, reason, missing=missing), {}, None
            return ResolvedModel(canonical, provider, model_id, litellm_model, False, reason=reason,
                                 missing=missing), {}, None
        # Values stay out of the reason: /health is public, and a base URL can hold credentials.
        return ResolvedModel(
            canonical, provider, model_id, litellm_model, False,
            reason="configured, custom base URL" if "api_base" in kwargs else "configured",
            vision=self._supports("supports_vision", litellm_model),
            pdf_input=self._supports("supports_pdf_input", litellm_model),
            capabilities_known=self._known(litellm_model)), kwargs, endpoint

    def _provider_of(self, mastra_id: str, provider: str, litellm_model: str) -> tuple[str, str | None, str | None]:
        """litellm's provider of ``litellm_model``, its fixed key and default base URL;
        ValueError when litellm does not know the provider."""
        if self._litellm is None:
            raise RuntimeError(f"resolving {mastra_id!r} needs litellm: attach() it first")
        try:
            _, llm_provider, fixed_key, default_base = self._litellm.get_llm_provider(litellm_model)
        except Exception as exc:
            raise ValueError(
                f"unknown model provider {provider!r} in {mastra_id!r} (litellm does not know it)") from exc
        return llm_provider, fixed_key, default_base

    def _configuration(self, litellm_model: str, llm_provider: str, fixed_key: str | None, default_base: str | None
                       ) -> tuple[tuple[str, ...], dict[str, Any], str | None]:
        """What the provider lacks, by litellm's ``validate_environment``, the call's
        credentials, and its endpoint (``endpoint``)."""
        kwargs, base_variable = self._credentials(litellm_model, llm_provider)
        report = self._validate(model=litellm_model, api_key=kwargs.get("api_key") or fixed_key,
                                api_base=kwargs.get("api_base") or default_base,
                                api_version=kwargs.get("api_version"))
        if base_variable is not None:
            endpoint = f"{shown_url(kwargs['api_base'])} ({base_variable})"
        else:
            endpoint = shown_url(default_base) if isinstance(default_base, str) and default_base else None
        return tuple(report.get("missing_keys") or ()), kwargs, endpoint

    def _credentials(self, litellm_model: str, llm_provider: str) -> tuple[dict[str, Any], str | None]:
        """The call's credentials, and the variable its base URL comes from (if any)."""
        env, upper = self._env, llm_provider.upper()
        required = list(self._required(model=litellm_model).get("missing_keys") or ())
        kwargs: dict[str, Any] = {}
        key = _first(env, [n for n in required if n.endswith(("_API_KEY", "_API_TOKEN"))] + [f"{upper}_API_KEY"])
        base_names = [n for n in required if n.endswith("_API_BASE")] + [f"{upper}_API_BASE", f"{upper}_BASE_URL"]
        base_variable = next((name for name in base_names if env.get(name, "").strip()), None)
        base = _first(env, base_names)
        version = _first(env, [f"{upper}_API_VERSION"])
        for name, value in (("api_key", key), ("api_base", base), ("api_version", version)):
            if value:
                kwargs[name] = value
        family = "aws" if llm_provider in _AWS_PROVIDERS else llm_provider
        for arg, *names in _CALL_ARGS.get(family, ()):
            value = _first(env, names)
            if value:
                kwargs[arg] = value
        return kwargs, base_variable

    def _supports(self, check: str, litellm_model: str) -> bool:
        try:
            return bool(getattr(self._litellm, check)(model=litellm_model))
        except Exception:  # unknown to litellm's model map: assume text only
            return False

    def _known(self, litellm_model: str) -> bool:
        """Whether litellm's model map has the model (its capability flags mean something)."""
        try:
            self._litellm.get_model_info(model=litellm_model)
        except Exception:
            return False
        return True


def _local(canonical: str, provider: str, model_id: str, reason: str, *, direct: bool = False,
           missing: tuple[str, ...] = ()) -> ResolvedModel:
    # The local model stands in for the requested one; the original id stays visible.
    litellm_model = f"{LOCAL_PROVIDER}/{model_id}" if direct else f"{LOCAL_PROVIDER}/{canonical}"
    return ResolvedModel(canonical, provider, model_id, litellm_model, True, reason=reason, missing=missing,
                         vision=True, pdf_input=True, capabilities_known=True)


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(names)
