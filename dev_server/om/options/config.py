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
observation / reflection. Unset, Mastra's defaults apply where Mastra applies them: a
temperature (0.3 observer, 0 reflector) only when its default model answers, the Google
thinking budgets (215, 1024) when a Google model answers (``dev_server.om.options.models``).
``hooks`` are the cycles' lifecycle callbacks (``dev_server.om.options.hooks``).

Each option sits where Mastra reads it (docs/observational-memory.md#options lists every one
with its status). ``observation.bufferOnIdle`` (the top-level key is read as its fallback,
like the top-level ``bufferTokens`` / ``bufferActivation`` / ``blockAfter``);
``observation.observeAttachments`` (``dev_server.om.options.attachments``);
``activateAfterIdle`` / ``activateOnProviderChange`` at the top level, under ``observation``
and under ``reflection``, each in force where Mastra applies it
(``dev_server.om.options.activation``); ``retrieval`` (``dev_server.om.options.retrieval``);
extractors (``dev_server.om.options.extractors``). Options of Mastra's that are not supported
here fail with their reason (``dev_server.om.options.checks``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dev_server.om.options.activation import (
    NO_TRIGGERS,
    Triggers,
    section_triggers,
    top_triggers,
)
from dev_server.om.options.attachments import (
    DEFAULT_OBSERVE_ATTACHMENTS,
    ObserveAttachments,
    parse_observe_attachments,
)
from dev_server.om.options.checks import fail, flag, positive_int, text, unknown
from dev_server.om.options.extractors import Extractor, parse_extractors
from dev_server.om.options.hooks import NO_HOOKS, Hooks, parse_hooks
from dev_server.om.options.models import (
    DEFAULT_MODEL,
    DEFAULT_PROVIDER_OPTIONS,
    ModelChoice,
    parse_model_choice,
    parse_model_settings,
    parse_provider_options,
)
from dev_server.om.options.retrieval import RetrievalConfig, Scope, describe_retrieval, parse_retrieval

MESSAGE_TOKENS = 30_000
OBSERVATION_TOKENS = 40_000
MAX_TOKENS_PER_BATCH = 10_000
PREVIOUS_OBSERVER_TOKENS = 2_000
BUFFER_TOKENS = 0.2
BUFFER_ACTIVATION = 0.8
BLOCK_AFTER = 1.2
REFLECTION_BUFFER_ACTIVATION = 0.5

_TOP_KEYS = {"enabled", "model", "scope", "observation", "reflection", "shareTokenBudget", "bufferTokens",
             "bufferActivation", "blockAfter", "activateAfterIdle", "activateOnProviderChange", "bufferOnIdle",
             "temporalMarkers", "obscureThreadIds", "retrieval", "hooks", "hookExecution"}
_OBSERVATION_KEYS = {"model", "instruction", "messageTokens", "maxTokensPerBatch", "modelSettings",
                     "previousObserverTokens", "truncatePreviousObservations", "bufferTokens", "bufferActivation",
                     "blockAfter", "providerOptions", "extract", "threadTitle", "manageWorkingMemory",
                     "observeAttachments", "bufferOnIdle", "activateAfterIdle", "activateOnProviderChange"}
_REFLECTION_KEYS = {"model", "instruction", "observationTokens", "modelSettings", "bufferActivation", "blockAfter",
                    "activateAfterIdle", "activateOnProviderChange", "providerOptions", "extract"}


def _model(name: str, value: Any) -> str | None:
    """The model's id (for a ``ModelByInputTokens`` or a list: the first one it names)."""
    if value is None:
        return None
    if not isinstance(value, str):
        return parse_model_choice(name, value, fail).label
    if not value.strip():
        raise fail(name, f"must be a model id like 'openai/gpt-4o-mini' or 'default', not {value!r}")
    value = value.strip()
    return DEFAULT_MODEL if value == "default" else value


def _settings(name: str, value: Any) -> dict[str, Any]:
    return parse_model_settings(name, value, fail)


def _provider_options(name: str, value: Any) -> dict[str, dict[str, Any]]:
    """Given, or Mastra's defaults (the Google thinking budgets of ``DEFAULT_PROVIDER_OPTIONS``)."""
    if value is None:
        return copy.deepcopy(DEFAULT_PROVIDER_OPTIONS[name.split(".")[0]])
    return parse_provider_options(name, value, fail)


def activation_ratio(buffer_activation: float, threshold: int) -> float:
    """``bufferActivation`` as the share of the window to activate: a ratio clamped to
    [0, 1], or an absolute retention ``v`` as ``1 - v / threshold``."""
    if buffer_activation > 1:
        return min(1.0, max(0.0, 1 - buffer_activation / threshold))
    return min(1.0, max(0.0, buffer_activation))


def _ratio_or_absolute(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise fail(name, f"must be a positive number, not {value!r}")
    if 1 < value < 1000:
        raise fail(name, f"must be a ratio in (0, 1] or an absolute token count >= 1000, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class ObservationConfig:
    model: str | None = None
    instruction: str | None = None
    message_tokens: int = MESSAGE_TOKENS
    max_tokens_per_batch: int = MAX_TOKENS_PER_BATCH
    model_settings: dict[str, Any] = field(default_factory=dict)  # Mastra's defaults: models.default_temperature
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
    # which images and files go to the observer (dev_server.om.options.attachments)
    observe_attachments: ObserveAttachments = DEFAULT_OBSERVE_ATTACHMENTS
    buffer_on_idle: bool = False  # buffer what a finished turn left unobserved (needs async buffering)
    # observation-level activateAfterIdle / activateOnProviderChange, the top level's when not given here;
    # in force on the standalone class only (dev_server.om.options.activation)
    triggers: Triggers = NO_TRIGGERS


@dataclass(frozen=True)
class ReflectionConfig:
    model: str | None = None
    instruction: str | None = None
    observation_tokens: int = OBSERVATION_TOKENS
    model_settings: dict[str, Any] = field(default_factory=dict)
    buffer_activation: float = REFLECTION_BUFFER_ACTIVATION
    block_after: float | None = None
    # reflection-level activateAfterIdle / activateOnProviderChange (never inherited); in force on the
    # standalone class only (dev_server.om.options.activation)
    triggers: Triggers = NO_TRIGGERS
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
class ObservationalMemoryOptions:
    enabled: bool = True
    model: str | None = None
    scope: Scope = "thread"
    observation: ObservationConfig = field(default_factory=lambda: resolve_observation({}, "thread", False))
    reflection: ReflectionConfig = field(default_factory=lambda: resolve_reflection({}, True))
    share_token_budget: bool = False
    triggers: Triggers = NO_TRIGGERS  # the top-level activateAfterIdle / activateOnProviderChange
    temporal_markers: bool = False
    obscure_thread_ids: bool = False  # resource scope: hash thread ids in what the observer reads
    # observation groups and the recall tool (docs/observational-memory.md#retrieval); None: off
    retrieval: RetrievalConfig | None = None
    model_choice: ModelChoice | None = None  # the top-level ``model`` (dev_server.om.options.models)
    hooks: Hooks = NO_HOOKS  # lifecycle callbacks (dev_server.om.options.hooks); never from the environment
    # run by the standalone ObservationalMemory (dev_server.om.manual), not an agent's memory: decides
    # which activation triggers are in force, as in Mastra (dev_server.om.options.activation)
    standalone: bool = False

    @property
    def async_buffering(self) -> bool:
        return self.observation.buffer_tokens is not False

    @property
    def buffer_on_idle(self) -> bool:
        """``observation.bufferOnIdle`` in force: it needs async buffering, as in Mastra."""
        return self.observation.buffer_on_idle and self.async_buffering

    @property
    def observation_triggers(self) -> Triggers:
        """What activates buffered observations early: an agent's memory reads the top level
        only, the standalone class ``observation.*`` with the top level as fallback."""
        return self.observation.triggers if self.standalone else self.triggers

    @property
    def reflection_triggers(self) -> Triggers:
        """What activates a buffered reflection early: ``reflection.*`` on the standalone
        class; nothing through an agent's memory (Mastra's ``Memory`` does not pass them on)."""
        return self.reflection.triggers if self.standalone else NO_TRIGGERS

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
                "activateAfterIdle": self.observation_triggers.after_idle,
                "activateOnProviderChange": self.observation_triggers.on_provider_change}


def resolve_observation(given: Mapping[str, Any], scope: str, share_budget: bool, top: Mapping[str, Any] | None = None,
                        top_triggers: Triggers = NO_TRIGGERS) -> ObservationConfig:
    """``observation`` with the buffering values (top-level ones as fallback: ``bufferTokens``,
    ``bufferActivation``, ``blockAfter``, ``bufferOnIdle``) resolved to tokens."""
    top = top or {}
    unknown("observation.", given, _OBSERVATION_KEYS)
    tokens = positive_int("observation.messageTokens", given.get("messageTokens", MESSAGE_TOKENS))
    batch = positive_int("observation.maxTokensPerBatch", given.get("maxTokensPerBatch", MAX_TOKENS_PER_BATCH))
    previous = given.get("previousObserverTokens", PREVIOUS_OBSERVER_TOKENS)
    if previous is not False and previous != 0:  # 0: no previous observations (with truncation on)
        previous = positive_int("observation.previousObserverTokens", previous)
    truncate = flag("observation.truncatePreviousObservations", given.get("truncatePreviousObservations"))

    def pick(key: str) -> Any:
        return given[key] if key in given else top.get(key)

    explicit_buffer = pick("bufferTokens")
    if share_budget and explicit_buffer is not False:
        raise fail("shareTokenBudget", "requires observation.bufferTokens: false (async buffering cannot share "
                                        "the budget)")
    if explicit_buffer is None:
        buffer: Any = False if scope == "resource" else BUFFER_TOKENS
    else:
        buffer = explicit_buffer
        if buffer is not False and scope == "resource":
            raise fail("observation.bufferTokens", "is not supported in resource scope (async buffering is off there)")
    resolved_buffer: int | Literal[False] = False
    activation = BUFFER_ACTIVATION
    block: float | None = None
    if buffer is not False:
        if isinstance(buffer, bool) or not isinstance(buffer, (int, float)) or buffer <= 0:
            raise fail("observation.bufferTokens",
                        f"must be false, a fraction in (0, 1) or a token count, not {buffer!r}")
        resolved_buffer = round(tokens * buffer) if buffer < 1 else int(buffer)
        if resolved_buffer >= tokens:
            raise fail("observation.bufferTokens", f"({resolved_buffer}) must be below messageTokens ({tokens})")
        if pick("bufferActivation") is not None:
            activation = _ratio_or_absolute("observation.bufferActivation", pick("bufferActivation"))
            if activation >= 1000 and activation >= tokens:
                raise fail("observation.bufferActivation", f"({activation:g}) must be below messageTokens ({tokens})")
        raw_block = pick("blockAfter") if pick("blockAfter") is not None else BLOCK_AFTER
        block = _block_after("observation.blockAfter", raw_block, tokens)
    return ObservationConfig(model=_model("observation.model", given.get("model")),
                             model_choice=_choice("observation.model", given.get("model")),
                             provider_options=_provider_options("observation.providerOptions",
                                                                given.get("providerOptions")),
                             instruction=text("observation.instruction", given.get("instruction")),
                             message_tokens=tokens, max_tokens_per_batch=batch,
                             model_settings=_settings("observation.modelSettings", given.get("modelSettings")),
                             previous_observer_tokens=previous, truncate_previous_observations=truncate,
                             buffer_tokens=resolved_buffer,
                             buffer_activation=activation, block_after=block,
                             extract=parse_extractors("observation.extract", given.get("extract")),
                             thread_title=flag("observation.threadTitle", given.get("threadTitle")),
                             manage_working_memory=flag("observation.manageWorkingMemory",
                                                         given.get("manageWorkingMemory")),
                             observe_attachments=parse_observe_attachments(
                                 "observation.observeAttachments", given.get("observeAttachments"), fail),
                             buffer_on_idle=flag("observation.bufferOnIdle" if "bufferOnIdle" in given
                                                  else "bufferOnIdle", pick("bufferOnIdle")),
                             triggers=section_triggers("observation", given, top_triggers, fail))


def resolve_reflection(given: Mapping[str, Any], buffering: bool) -> ReflectionConfig:
    unknown("reflection.", given, _REFLECTION_KEYS)
    tokens = positive_int("reflection.observationTokens", given.get("observationTokens", OBSERVATION_TOKENS))
    activation = REFLECTION_BUFFER_ACTIVATION
    block: float | None = None
    if given.get("bufferActivation") is not None:
        activation = _ratio_or_absolute("reflection.bufferActivation", given["bufferActivation"])
    if buffering:
        block = _block_after("reflection.blockAfter", given.get("blockAfter", BLOCK_AFTER), tokens)
    return ReflectionConfig(triggers=section_triggers("reflection", given, NO_TRIGGERS, fail),
                            model=_model("reflection.model", given.get("model")),
                            model_choice=_choice("reflection.model", given.get("model")),
                            provider_options=_provider_options("reflection.providerOptions",
                                                               given.get("providerOptions")),
                            instruction=text("reflection.instruction", given.get("instruction")),
                            observation_tokens=tokens,
                            model_settings=_settings("reflection.modelSettings", given.get("modelSettings")),
                            buffer_activation=activation, block_after=block,
                            extract=parse_extractors("reflection.extract", given.get("extract")))


def _choice(name: str, value: Any) -> ModelChoice | None:
    return None if value is None else parse_model_choice(name, value, fail)


def _block_after(name: str, value: Any, threshold: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1:
        raise fail(name, f"must be a multiplier >= 1 or an absolute token count >= 100, not {value!r}")
    absolute = value * threshold if value < 100 else float(value)
    if absolute < threshold:
        raise fail(name, f"({value:g}) must not be below the threshold ({threshold})")
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
    unknown("", value, _TOP_KEYS)
    enabled = value.get("enabled", True)
    if not isinstance(enabled, bool):
        raise fail("enabled", "must be true or false")
    if not enabled:
        return None
    scope = value.get("scope", "thread")
    if scope not in ("thread", "resource"):
        raise fail("scope", f"must be 'thread' or 'resource', not {scope!r}")
    share = value.get("shareTokenBudget", False)
    if not isinstance(share, bool):
        raise fail("shareTokenBudget", "must be true or false")
    observation_given = value.get("observation") or {}
    reflection_given = value.get("reflection") or {}
    for name, given in (("observation", observation_given), ("reflection", reflection_given)):
        if not isinstance(given, Mapping):
            raise fail(name, "must be an object")
    model = _model("model", value.get("model"))
    if model is not None and (observation_given.get("model") is not None or reflection_given.get("model") is not None):
        raise fail("model", "cannot be combined with observation.model or reflection.model: set one or the other")
    triggers = top_triggers(value, fail)
    observation = resolve_observation(observation_given, scope, share, top=value, top_triggers=triggers)
    reflection = resolve_reflection(reflection_given, observation.buffer_tokens is not False)
    _hook_execution(value.get("hookExecution"))
    return ObservationalMemoryOptions(enabled=True, model=model, scope=scope, observation=observation,
                                      reflection=reflection, share_token_budget=share, triggers=triggers,
                                      temporal_markers=flag("temporalMarkers", value.get("temporalMarkers")),
                                      obscure_thread_ids=flag("obscureThreadIds", value.get("obscureThreadIds")),
                                      retrieval=parse_retrieval(value.get("retrieval")),
                                      model_choice=_choice("model", value.get("model")),
                                      hooks=parse_hooks(value.get("hooks"), fail))


def _hook_execution(value: Any) -> None:
    """``hookExecution``: Mastra's default, ``"non-blocking"``, is what the hooks do here (a
    raising hook is logged and never fails a cycle); ``"await"`` (a raising hook fails a
    manual or synchronous cycle) is not supported."""
    if value not in (None, "non-blocking"):
        raise fail("hookExecution", f"must be 'non-blocking' (a raising hook never fails a cycle here); "
                                     f"'await' is not supported, not {value!r}")


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
