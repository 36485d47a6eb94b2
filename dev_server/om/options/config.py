"""Observational Memory's configuration: Mastra's options, their defaults and their checks.

``observational_memory`` on ``MemoryOptions`` takes ``True`` (every default), ``False``
(off), a dict in Mastra's camelCase shape (``{"scope": ..., "observation": {"messageTokens":
...}, ...}``) or an ``ObservationalMemoryOptions``. Defaults and rules follow
docs/observational-memory.md#thresholds: 30,000 message tokens before observing, 40,000 observation
tokens before reflecting, ``bufferTokens`` 0.2 of the threshold (a fraction in (0, 1) or an
absolute count below the threshold; ``False`` turns async buffering off),
``bufferActivation`` 0.8 (a ratio in (0, 1], or an absolute retention >= 1000),
``blockAfter`` 1.2 (a multiplier in [1, 100), or absolute >= 100, never below the
threshold). A bad value fails here, at construction, with a ``ValueError`` that names the
field (``observationalMemory.observation.messageTokens ...``).

Models: ``model`` serves both observer and reflector and excludes ``observation.model`` /
``reflection.model``. Without any, the engine picks Mastra's default,
``google/gemini-2.5-flash``, when its key is configured, else the agent's own model (which
is the built-in local model when no provider key is set at all); ``"default"`` names that
choice explicitly. Besides an id, each of them takes ``ModelByInputTokens`` (or
``{"upTo": {tokens: model}}``) or a list ``[{"model": ..., "maxRetries": n}, ...]`` tried in
order (``dev_server.om.options.models``); resolution happens per call. ``modelSettings`` (``temperature``,
``maxOutputTokens``, ``topP``, ``topK``, ``presencePenalty``, ``frequencyPenalty``,
``stopSequences``, ``seed``, ``maxRetries``) and ``providerOptions`` (``{provider: {litellm
parameter: value}}``, the entry of the provider that answers is passed to litellm) are per
observation / reflection. ``hooks`` are the cycles' lifecycle callbacks (``dev_server.om.options.hooks``).

Retrieval (docs/observational-memory.md#retrieval): ``retrieval`` takes ``True`` (Mastra's
defaults: no vector search, scope ``resource``), ``False``, or ``{"vector": bool, "scope": "thread" | "resource",
"instructions": str}``. With it on, each observation cycle is kept as an
``<observation-group>`` with the range of the messages it came from, and the actor gets
the ``recall`` tool (``dev_server.om.retrieval.recall_tool``) and instructions for it
(``dev_server.om.retrieval.instructions``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dev_server.om.options.extractors import Extractor, parse_extractors
from dev_server.om.options.hooks import NO_HOOKS, Hooks, parse_hooks
from dev_server.om.options.models import (
    DEFAULT_MODEL,
    ModelChoice,
    parse_model_choice,
    parse_model_settings,
    parse_provider_options,
)

MESSAGE_TOKENS = 30_000
OBSERVATION_TOKENS = 40_000
MAX_TOKENS_PER_BATCH = 10_000
PREVIOUS_OBSERVER_TOKENS = 2_000
BUFFER_TOKENS = 0.2
BUFFER_ACTIVATION = 0.8
BLOCK_AFTER = 1.2
REFLECTION_BUFFER_ACTIVATION = 0.5
Scope = Literal["thread", "resource"]
IdleSetting = int | Literal["auto"] | None  # resolved activateAfterIdle: milliseconds, "auto", or off

_TOP_KEYS = {"enabled", "model", "scope", "observation", "reflection", "shareTokenBudget", "bufferTokens",
             "bufferActivation", "blockAfter", "activateAfterIdle", "activateOnProviderChange", "bufferOnIdle",
             "temporalMarkers", "obscureThreadIds", "retrieval", "hooks"}
_OBSERVATION_KEYS = {"model", "instruction", "messageTokens", "maxTokensPerBatch", "modelSettings",
                     "previousObserverTokens", "truncatePreviousObservations", "bufferTokens", "bufferActivation",
                     "blockAfter", "providerOptions", "extract", "threadTitle", "manageWorkingMemory"}
_RETRIEVAL_KEYS = {"vector", "scope", "instructions"}
_REFLECTION_KEYS = {"model", "instruction", "observationTokens", "modelSettings", "bufferActivation", "blockAfter",
                    "activateAfterIdle", "activateOnProviderChange", "providerOptions", "extract"}


def _fail(name: str, problem: str) -> ValueError:
    return ValueError(f"observationalMemory.{name} {problem}")


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _fail(name, f"must be a positive integer, not {value!r}")
    return value


def _model(name: str, value: Any) -> str | None:
    """The model's id (for a ``ModelByInputTokens`` or a list: the first one it names)."""
    if value is None:
        return None
    if not isinstance(value, str):
        return parse_model_choice(name, value, _fail).label
    if not value.strip():
        raise _fail(name, f"must be a model id like 'openai/gpt-4o-mini' or 'default', not {value!r}")
    value = value.strip()
    return DEFAULT_MODEL if value == "default" else value


def _settings(name: str, value: Any) -> dict[str, Any]:
    return parse_model_settings(name, value, _fail)


def _provider_options(name: str, value: Any) -> dict[str, dict[str, Any]]:
    return parse_provider_options(name, value, _fail)


def _text(name: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _fail(name, "must be a string")
    return value or None


def _unknown(name: str, given: Mapping[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(given) - allowed)
    if extra:
        raise _fail(f"{name}{extra[0]}" if name else extra[0],
                    f"is not an option (options: {', '.join(sorted(allowed))})")


def _flag(name: str, value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _fail(name, "must be true or false")
    return value


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")
_UNIT_MS = {**dict.fromkeys(("ms", "msec", "millisecond", "milliseconds"), 1),
            **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1000),
            **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000),
            **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3_600_000),
            **dict.fromkeys(("d", "day", "days"), 86_400_000)}


def parse_idle(name: str, value: Any) -> IdleSetting:
    """``activateAfterIdle``: milliseconds, a duration (``"5m"``, ``"1hr"``, ``"90s"``),
    ``"auto"`` (the provider's prompt-cache TTL, ``dev_server.om.engine.idle``) or false/None (off)."""
    if value is None or value is False:
        return None
    if value == "auto":
        return "auto"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value <= 0:
            raise _fail(name, f"must be a positive number of milliseconds, not {value!r}")
        return int(value)
    if isinstance(value, str):
        match = _DURATION.match(value.lower())
        if match and match.group(2) in _UNIT_MS and float(match.group(1)) > 0:
            return int(float(match.group(1)) * _UNIT_MS[match.group(2)])
    raise _fail(name, f"must be milliseconds, a duration like '5m' or '1hr', 'auto' or false, not {value!r}")


def activation_ratio(buffer_activation: float, threshold: int) -> float:
    """``bufferActivation`` as the share of the window to activate: a ratio clamped to
    [0, 1], or an absolute retention ``v`` as ``1 - v / threshold``."""
    if buffer_activation > 1:
        return min(1.0, max(0.0, 1 - buffer_activation / threshold))
    return min(1.0, max(0.0, buffer_activation))


def _ratio_or_absolute(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise _fail(name, f"must be a positive number, not {value!r}")
    if 1 < value < 1000:
        raise _fail(name, f"must be a ratio in (0, 1] or an absolute token count >= 1000, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class ObservationConfig:
    model: str | None = None
    instruction: str | None = None
    message_tokens: int = MESSAGE_TOKENS
    max_tokens_per_batch: int = MAX_TOKENS_PER_BATCH
    model_settings: dict[str, Any] = field(default_factory=lambda: {"temperature": 0.3})
    previous_observer_tokens: int | Literal[False] = PREVIOUS_OBSERVER_TOKENS
    truncate_previous_observations: bool = False  # ours: Mastra's current release shows the whole log
    buffer_tokens: int | Literal[False] = False  # resolved: absolute tokens, or False (no async buffering)
    buffer_activation: float = BUFFER_ACTIVATION
    block_after: float | None = None  # resolved: absolute tokens, or None
    model_choice: ModelChoice | None = None  # ``model`` as given (dev_server.om.options.models); None: not set here
    provider_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    extract: tuple[Extractor, ...] = ()  # the user's extractors (dev_server.om.options.extractors)
    thread_title: bool = False  # the observer proposes the thread's title
    manage_working_memory: bool = False  # the observer keeps working memory (the agent's tool is then off)


@dataclass(frozen=True)
class ReflectionConfig:
    model: str | None = None
    instruction: str | None = None
    observation_tokens: int = OBSERVATION_TOKENS
    model_settings: dict[str, Any] = field(default_factory=lambda: {"temperature": 0})
    buffer_activation: float = REFLECTION_BUFFER_ACTIVATION
    block_after: float | None = None
    activate_after_idle: IdleSetting = None  # reflections opt in separately
    activate_on_provider_change: bool = False
    model_choice: ModelChoice | None = None
    provider_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    extract: tuple[Extractor, ...] = ()

    @property
    def activation_point(self) -> int:
        """Observation tokens at which a buffered reflection starts (``bufferActivation`` of the threshold)."""
        activation = self.buffer_activation
        ratio = activation if activation <= 1 else activation / self.observation_tokens
        return round(self.observation_tokens * min(1.0, ratio))


@dataclass(frozen=True)
class RetrievalConfig:
    """``retrieval``: observation groups, the ``recall`` tool and its instructions
    (docs/observational-memory.md#retrieval)."""

    vector: bool = False  # search by meaning (Memory.semantic_search); keyword search otherwise
    scope: Scope = "resource"  # what recall may read: the current thread, or all of the resource's
    instructions: str | None = None  # appended under "### Additional recall guidance"


def parse_retrieval(value: Any) -> RetrievalConfig | None:
    """``retrieval`` as options, or None when it is off."""
    if value is None or value is False:
        return None
    if value is True:
        return RetrievalConfig()
    if isinstance(value, RetrievalConfig):
        return value
    if not isinstance(value, Mapping):
        raise _fail("retrieval", f"must be true, false or an object {{vector, scope, instructions}}, not {value!r}")
    _unknown("retrieval.", value, _RETRIEVAL_KEYS)
    scope = value.get("scope", "resource")
    if scope not in ("thread", "resource"):
        raise _fail("retrieval.scope", f"must be 'thread' or 'resource', not {scope!r}")
    instructions = _text("retrieval.instructions", value.get("instructions"))
    return RetrievalConfig(vector=_flag("retrieval.vector", value.get("vector")), scope=scope,
                           instructions=instructions.strip() if instructions and instructions.strip() else None)


@dataclass(frozen=True)
class ObservationalMemoryOptions:
    enabled: bool = True
    model: str | None = None
    scope: Scope = "thread"
    observation: ObservationConfig = field(default_factory=lambda: resolve_observation({}, "thread", False))
    reflection: ReflectionConfig = field(default_factory=lambda: resolve_reflection({}, True))
    share_token_budget: bool = False
    activate_after_idle: IdleSetting = None  # observations only; ms, or "auto" (by the actor's provider)
    activate_on_provider_change: bool = False
    buffer_on_idle: bool = False
    temporal_markers: bool = False
    obscure_thread_ids: bool = False  # resource scope: hash thread ids in what the observer reads
    # observation groups and the recall tool (docs/observational-memory.md#retrieval); None: off
    retrieval: RetrievalConfig | None = None
    model_choice: ModelChoice | None = None  # the top-level ``model`` (dev_server.om.options.models)
    hooks: Hooks = NO_HOOKS  # lifecycle callbacks (dev_server.om.options.hooks); never from the environment

    @property
    def async_buffering(self) -> bool:
        return self.observation.buffer_tokens is not False

    @property
    def observer_model(self) -> str | None:
        return self.model or self.observation.model

    @property
    def reflector_model(self) -> str | None:
        return self.model or self.reflection.model

    @property
    def observer_choice(self) -> ModelChoice:
        return self.model_choice or self.observation.model_choice or parse_model_choice("model", None)

    @property
    def reflector_choice(self) -> ModelChoice:
        return self.model_choice or self.reflection.model_choice or parse_model_choice("model", None)

    def message_threshold(self, observation_tokens: int = 0) -> int:
        """The unobserved-token threshold; with a shared budget it grows as observations shrink."""
        threshold = self.observation.message_tokens
        if self.share_token_budget:
            total = threshold + self.reflection.observation_tokens
            return max(total - observation_tokens, threshold)
        return threshold

    def reflection_threshold_for_status(self, observation_tokens: int = 0) -> int:
        """The observations window's threshold in ``data-om-status``: with a shared budget,
        what the messages leave of it (at least 1000); reflection itself keeps its own."""
        if self.share_token_budget:
            total = self.observation.message_tokens + self.reflection.observation_tokens
            return max(total - self.message_threshold(observation_tokens), 1000)
        return self.reflection.observation_tokens

    def retention_floor(self) -> int:
        """Tokens of observed messages kept in the window after an observation: none
        without async buffering, else what ``bufferActivation`` leaves."""
        if not self.async_buffering:
            return 0
        threshold = self.observation.message_tokens
        return round(threshold * (1 - activation_ratio(self.observation.buffer_activation, threshold)))

    def snapshot(self) -> dict[str, Any]:
        """What a new record stores as its ``config`` (Mastra's ``{observation, reflection, scope}``)."""
        return {"scope": self.scope,
                "observation": {"messageTokens": self.observation.message_tokens,
                                "bufferTokens": self.observation.buffer_tokens,
                                "bufferActivation": self.observation.buffer_activation,
                                "blockAfter": self.observation.block_after,
                                "maxTokensPerBatch": self.observation.max_tokens_per_batch},
                "reflection": {"observationTokens": self.reflection.observation_tokens,
                               "bufferActivation": self.reflection.buffer_activation,
                               "blockAfter": self.reflection.block_after},
                "shareTokenBudget": self.share_token_budget,
                "activateAfterIdle": self.activate_after_idle,
                "activateOnProviderChange": self.activate_on_provider_change}


def resolve_observation(given: Mapping[str, Any], scope: str, share_budget: bool,
                        top: Mapping[str, Any] | None = None) -> ObservationConfig:
    """``observation`` with the buffering values (top-level ones as fallback) resolved to tokens."""
    top = top or {}
    _unknown("observation.", given, _OBSERVATION_KEYS)
    tokens = _positive_int("observation.messageTokens", given.get("messageTokens", MESSAGE_TOKENS))
    batch = _positive_int("observation.maxTokensPerBatch", given.get("maxTokensPerBatch", MAX_TOKENS_PER_BATCH))
    previous = given.get("previousObserverTokens", PREVIOUS_OBSERVER_TOKENS)
    if previous is not False:
        previous = _positive_int("observation.previousObserverTokens", previous)
    truncate = _flag("observation.truncatePreviousObservations", given.get("truncatePreviousObservations"))

    def pick(key: str) -> Any:
        return given[key] if key in given else top.get(key)

    explicit_buffer = pick("bufferTokens")
    if share_budget and explicit_buffer is not False:
        raise _fail("shareTokenBudget", "requires observation.bufferTokens: false (async buffering cannot share "
                                        "the budget)")
    if explicit_buffer is None:
        buffer: Any = False if scope == "resource" else BUFFER_TOKENS
    else:
        buffer = explicit_buffer
        if buffer is not False and scope == "resource":
            raise _fail("observation.bufferTokens", "is not supported in resource scope (async buffering is off there)")
    resolved_buffer: int | Literal[False] = False
    activation = BUFFER_ACTIVATION
    block: float | None = None
    if buffer is not False:
        if isinstance(buffer, bool) or not isinstance(buffer, (int, float)) or buffer <= 0:
            raise _fail("observation.bufferTokens",
                        f"must be false, a fraction in (0, 1) or a token count, not {buffer!r}")
        resolved_buffer = round(tokens * buffer) if buffer < 1 else int(buffer)
        if resolved_buffer >= tokens:
            raise _fail("observation.bufferTokens", f"({resolved_buffer}) must be below messageTokens ({tokens})")
        if pick("bufferActivation") is not None:
            activation = _ratio_or_absolute("observation.bufferActivation", pick("bufferActivation"))
            if activation >= 1000 and activation >= tokens:
                raise _fail("observation.bufferActivation", f"({activation:g}) must be below messageTokens ({tokens})")
        raw_block = pick("blockAfter") if pick("blockAfter") is not None else BLOCK_AFTER
        block = _block_after("observation.blockAfter", raw_block, tokens)
    return ObservationConfig(model=_model("observation.model", given.get("model")),
                             model_choice=_choice("observation.model", given.get("model")),
                             provider_options=_provider_options("observation.providerOptions",
                                                                given.get("providerOptions")),
                             instruction=_text("observation.instruction", given.get("instruction")),
                             message_tokens=tokens, max_tokens_per_batch=batch,
                             model_settings={"temperature": 0.3, **_settings("observation.modelSettings",
                                                                              given.get("modelSettings"))},
                             previous_observer_tokens=previous, truncate_previous_observations=truncate,
                             buffer_tokens=resolved_buffer,
                             buffer_activation=activation, block_after=block,
                             extract=parse_extractors("observation.extract", given.get("extract")),
                             thread_title=_flag("observation.threadTitle", given.get("threadTitle")),
                             manage_working_memory=_flag("observation.manageWorkingMemory",
                                                         given.get("manageWorkingMemory")))


def resolve_reflection(given: Mapping[str, Any], buffering: bool) -> ReflectionConfig:
    _unknown("reflection.", given, _REFLECTION_KEYS)
    tokens = _positive_int("reflection.observationTokens", given.get("observationTokens", OBSERVATION_TOKENS))
    activation = REFLECTION_BUFFER_ACTIVATION
    block: float | None = None
    if given.get("bufferActivation") is not None:
        activation = _ratio_or_absolute("reflection.bufferActivation", given["bufferActivation"])
    if buffering:
        block = _block_after("reflection.blockAfter", given.get("blockAfter", BLOCK_AFTER), tokens)
    return ReflectionConfig(activate_after_idle=parse_idle("reflection.activateAfterIdle",
                                                           given.get("activateAfterIdle")),
                            activate_on_provider_change=_flag("reflection.activateOnProviderChange",
                                                              given.get("activateOnProviderChange")),
                            model=_model("reflection.model", given.get("model")),
                            model_choice=_choice("reflection.model", given.get("model")),
                            provider_options=_provider_options("reflection.providerOptions",
                                                               given.get("providerOptions")),
                            instruction=_text("reflection.instruction", given.get("instruction")),
                            observation_tokens=tokens,
                            model_settings={"temperature": 0, **_settings("reflection.modelSettings",
                                                                           given.get("modelSettings"))},
                            buffer_activation=activation, block_after=block,
                            extract=parse_extractors("reflection.extract", given.get("extract")))


def _choice(name: str, value: Any) -> ModelChoice | None:
    return None if value is None else parse_model_choice(name, value, _fail)


def _block_after(name: str, value: Any, threshold: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1:
        raise _fail(name, f"must be a multiplier >= 1 or an absolute token count >= 100, not {value!r}")
    absolute = value * threshold if value < 100 else float(value)
    if absolute < threshold:
        raise _fail(name, f"({value:g}) must not be below the threshold ({threshold})")
    return absolute


def observational_memory_options(value: Any) -> ObservationalMemoryOptions | None:
    """``MemoryOptions.observational_memory`` as options, or None when OM is off."""
    if value is None or value is False:
        return None
    if isinstance(value, ObservationalMemoryOptions):
        return value if value.enabled else None
    if value is True:
        return ObservationalMemoryOptions()
    if not isinstance(value, Mapping):
        raise ValueError(f"observationalMemory must be true, false or an options object, not {value!r}")
    _unknown("", value, _TOP_KEYS)
    enabled = value.get("enabled", True)
    if not isinstance(enabled, bool):
        raise _fail("enabled", "must be true or false")
    if not enabled:
        return None
    scope = value.get("scope", "thread")
    if scope not in ("thread", "resource"):
        raise _fail("scope", f"must be 'thread' or 'resource', not {scope!r}")
    share = value.get("shareTokenBudget", False)
    if not isinstance(share, bool):
        raise _fail("shareTokenBudget", "must be true or false")
    observation_given = value.get("observation") or {}
    reflection_given = value.get("reflection") or {}
    for name, given in (("observation", observation_given), ("reflection", reflection_given)):
        if not isinstance(given, Mapping):
            raise _fail(name, "must be an object")
    model = _model("model", value.get("model"))
    if model is not None and (observation_given.get("model") is not None or reflection_given.get("model") is not None):
        raise _fail("model", "cannot be combined with observation.model or reflection.model: set one or the other")
    observation = resolve_observation(observation_given, scope, share, top=value)
    reflection = resolve_reflection(reflection_given, observation.buffer_tokens is not False)
    buffer_on_idle = _flag("bufferOnIdle", value.get("bufferOnIdle"))
    if buffer_on_idle and observation.buffer_tokens is False:
        raise _fail("bufferOnIdle", "needs async buffering (observation.bufferTokens must not be false)")
    return ObservationalMemoryOptions(enabled=True, model=model, scope=scope, observation=observation,
                                      reflection=reflection, share_token_budget=share,
                                      activate_after_idle=parse_idle("activateAfterIdle",
                                                                     value.get("activateAfterIdle")),
                                      activate_on_provider_change=_flag("activateOnProviderChange",
                                                                        value.get("activateOnProviderChange")),
                                      buffer_on_idle=buffer_on_idle,
                                      temporal_markers=_flag("temporalMarkers", value.get("temporalMarkers")),
                                      obscure_thread_ids=_flag("obscureThreadIds", value.get("obscureThreadIds")),
                                      retrieval=parse_retrieval(value.get("retrieval")),
                                      model_choice=_choice("model", value.get("model")),
                                      hooks=parse_hooks(value.get("hooks"), _fail))


def describe_om(options: ObservationalMemoryOptions | None) -> dict[str, Any]:
    """OM's part of ``GET /memory/config`` (Mastra's Studio REST API: observational memory); the routes add the models
    that actually answer (``observationModel`` / ``reflectionModel``)."""
    if options is None:
        return {"enabled": False}
    return {"enabled": True, "scope": options.scope, "shareTokenBudget": options.share_token_budget,
            "messageTokens": options.observation.message_tokens,
            "observationTokens": options.reflection.observation_tokens,
            "bufferTokens": options.observation.buffer_tokens,
            "observationModel": options.observer_model or DEFAULT_MODEL,
            "reflectionModel": options.reflector_model or DEFAULT_MODEL,
            "observationModelChoice": options.observer_choice.describe(),
            "reflectionModelChoice": options.reflector_choice.describe(),
            "retrieval": describe_retrieval(options.retrieval),
            "threadTitle": options.observation.thread_title,
            "manageWorkingMemory": options.observation.manage_working_memory,
            "extract": {"observation": [e.name for e in options.observation.extract],
                        "reflection": [e.name for e in options.reflection.extract]}}


def merged_options(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base`` (Mastra's options objects), one level deep: ``observation``
    and ``reflection`` merge key by key, anything else is replaced."""
    merged = dict(base)
    for key, value in over.items():
        own = merged.get(key)
        merged[key] = {**own, **value} if isinstance(value, Mapping) and isinstance(own, Mapping) else value
    return merged


def describe_retrieval(retrieval: RetrievalConfig | None) -> dict[str, Any] | bool:
    if retrieval is None:
        return False
    return {"vector": retrieval.vector, "scope": retrieval.scope, "instructions": retrieval.instructions}
