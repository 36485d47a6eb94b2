"""Who observes and reflects: one model, a model by input size, or a list tried in order.

``model`` (top level, ``observation.model``, ``reflection.model``) takes, as in Mastra:

* a model id (``"openai/gpt-4o-mini"``), or ``"default"`` / nothing: Mastra's
  ``google/gemini-2.5-flash`` when its key is set, else the agent's own model;
* ``ModelByInputTokens({8000: "openai/gpt-4o-mini", 100000: "google/gemini-2.5-pro"})``, or
  its dict form ``{"upTo": {8000: ..., 100000: ...}}``: the first model whose threshold is at
  least the call's input tokens (estimated with ``dev_server.om.tokens.counting``). Thresholds are positive
  integers given in increasing order; an input above the last one goes to the last model
  (ours: Mastra leaves the case open; refusing to observe a big window would lose memory);
* a list ``[{"model": id_or_ModelByInputTokens, "maxRetries": n}, ...]`` (or
  ``ModelWithRetries`` values): tried in order; each entry gets its own retry count (the
  client's retryable errors only: connection, rate limit, provider 5xx; without
  ``maxRetries`` the gateway's ``DEV_SERVER_MODEL_RETRIES``); when an entry's last attempt
  fails, the next entry is asked; the last one's error ends the cycle.

Everything is checked at construction; a bad value is a ``ValueError`` naming the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_MODEL = "google/gemini-2.5-flash"
DEFAULT_MAX_OUTPUT_TOKENS = 100_000  # Mastra's, for the default model and ModelByInputTokens only (2.1)
# Mastra's default temperatures, sent only when its default model answers and none is configured
DEFAULT_TEMPERATURE = {"observation": 0.3, "reflection": 0.0}
# Mastra's default providerOptions (Google thinking budgets), as litellm parameters; replaced
# by any providerOptions given, and read only when a Google model answers
DEFAULT_PROVIDER_OPTIONS = {"observation": {"google": {"thinking": {"type": "enabled", "budget_tokens": 215}}},
                            "reflection": {"google": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}}

Fail = Callable[[str, str], ValueError]


def _plain_fail(name: str, problem: str) -> ValueError:
    return ValueError(f"{name} {problem}")


class ModelByInputTokens:
    """Pick a model by the size of the call's input: ``{max input tokens: model id}``."""

    def __init__(self, up_to: Mapping[Any, str], *, _name: str = "ModelByInputTokens.upTo",
                 _fail: Fail = _plain_fail) -> None:
        if not isinstance(up_to, Mapping) or not up_to:
            raise _fail(_name, "must be a non-empty object {maxInputTokens: model id}")
        tiers: list[tuple[int, str]] = []
        for raw, model in up_to.items():
            tokens = int(raw) if isinstance(raw, str) and raw.strip().isdigit() else raw
            if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
                raise _fail(_name, f"thresholds must be positive integers, not {raw!r}")
            if tiers and tokens <= tiers[-1][0]:
                raise _fail(_name, f"thresholds must be in increasing order ({tokens} after {tiers[-1][0]})")
            if not isinstance(model, str) or not model.strip():
                raise _fail(f"{_name}.{tokens}", f"must be a model id, not {model!r}")
            tiers.append((tokens, DEFAULT_MODEL if model.strip() == "default" else model.strip()))
        self.tiers: tuple[tuple[int, str], ...] = tuple(tiers)

    def pick(self, input_tokens: int) -> str:
        for limit, model in self.tiers:
            if input_tokens <= limit:
                return model
        return self.tiers[-1][1]

    def __repr__(self) -> str:
        return f"ModelByInputTokens({dict(self.tiers)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelByInputTokens) and other.tiers == self.tiers

    def __hash__(self) -> int:
        return hash(self.tiers)


@dataclass(frozen=True)
class ModelWithRetries:
    model: str | ModelByInputTokens
    max_retries: int | None = None  # None: the client's own retry count

    def pick(self, input_tokens: int) -> str:
        return self.model.pick(input_tokens) if isinstance(self.model, ModelByInputTokens) else self.model


@dataclass(frozen=True)
class ModelChoice:
    """A resolved ``model`` option: the entries to try, in order."""

    candidates: tuple[ModelWithRetries, ...]
    default: bool = False  # nothing (or "default") configured: the engine's usual pick

    @property
    def label(self) -> str:
        """One id to show (``/memory/config``) and to pick the reflector's start level by."""
        first = self.candidates[0].model
        return first.tiers[0][1] if isinstance(first, ModelByInputTokens) else first

    def describe(self) -> Any:
        if len(self.candidates) == 1 and self.candidates[0].max_retries is None:
            return _describe_model(self.candidates[0].model)
        return [{"model": _describe_model(c.model), "maxRetries": c.max_retries} for c in self.candidates]


DEFAULT_CHOICE = ModelChoice((ModelWithRetries(DEFAULT_MODEL),), default=True)


def _describe_model(model: str | ModelByInputTokens) -> Any:
    return {"upTo": {str(k): v for k, v in model.tiers}} if isinstance(model, ModelByInputTokens) else model


def _single(name: str, value: Any, fail: Fail) -> str | ModelByInputTokens:
    if isinstance(value, ModelByInputTokens):
        return value
    if isinstance(value, str) and value.strip():
        return DEFAULT_MODEL if value.strip() == "default" else value.strip()
    if isinstance(value, Mapping) and set(value) == {"upTo"}:
        return ModelByInputTokens(value["upTo"], _name=f"{name}.upTo", _fail=fail)
    raise fail(name, "must be a model id like 'openai/gpt-4o-mini', ModelByInputTokens / {\"upTo\": {tokens: "
                     f"model}}, or a list of {{model, maxRetries}}, not {value!r}")


def _retries(name: str, value: Any, fail: Fail) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise fail(name, f"must be a whole number >= 0, not {value!r}")
    return value


def parse_model_choice(name: str, value: Any, fail: Fail = _plain_fail) -> ModelChoice:
    """The ``model`` option ``value`` (None: the default choice) as a ``ModelChoice``."""
    if value is None or value == "default":
        return DEFAULT_CHOICE
    if isinstance(value, ModelChoice):
        return value
    if isinstance(value, ModelWithRetries):
        value = [value]
    if isinstance(value, Sequence) and not isinstance(value, str):
        if not value:
            raise fail(name, "must not be an empty list (give at least one {model, maxRetries})")
        entries = []
        for index, entry in enumerate(value):
            where = f"{name}[{index}]"
            if isinstance(entry, ModelWithRetries):
                entries.append(ModelWithRetries(_single(f"{where}.model", entry.model, fail),
                                                _retries(f"{where}.maxRetries", entry.max_retries, fail)))
                continue
            if not isinstance(entry, Mapping) or "model" not in entry:
                raise fail(where, f"must be an object {{model, maxRetries}}, not {entry!r}")
            extra = sorted(set(entry) - {"model", "maxRetries"})
            if extra:
                raise fail(f"{where}.{extra[0]}", "is not an option (options: maxRetries, model)")
            entries.append(ModelWithRetries(_single(f"{where}.model", entry["model"], fail),
                                            _retries(f"{where}.maxRetries", entry.get("maxRetries"), fail)))
        return ModelChoice(tuple(entries))
    return ModelChoice((ModelWithRetries(_single(name, value, fail)),))


MODEL_SETTINGS = {"temperature", "maxOutputTokens", "topP", "topK", "presencePenalty", "frequencyPenalty",
                  "stopSequences", "seed", "maxRetries"}


def parse_model_settings(name: str, value: Any, _fail: Fail = _plain_fail) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _fail(name, "must be an object such as {\"temperature\": 0.3}")
    extra = sorted(set(value) - MODEL_SETTINGS)
    if extra:
        raise _fail(f"{name}.{extra[0]}", f"is not a model setting (settings: {', '.join(sorted(MODEL_SETTINGS))})")
    for key in ("maxOutputTokens", "maxRetries", "topK", "seed"):
        if key in value and value[key] is not None and (isinstance(value[key], bool) or not isinstance(value[key], int)
                                                        or value[key] < (1 if key == "maxOutputTokens" else 0)):
            raise _fail(f"{name}.{key}", f"must be a whole number, not {value[key]!r}")
    return dict(value)


def parse_provider_options(name: str, value: Any, _fail: Fail = _plain_fail) -> dict[str, dict[str, Any]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) for v in value.values()):
        raise _fail(name, "must be an object {provider: {option: value}}, e.g. {\"openai\": {\"reasoning_effort\": "
                          "\"low\"}}")
    return {str(k): dict(v) for k, v in value.items()}


def default_temperature(operation: str, answered_by_default: bool) -> float | None:
    """The temperature of a call whose ``modelSettings`` name none: Mastra's default (0.3 for
    the observer, 0 for the reflector) when Mastra's default model itself answers, else none
    (the provider's own)."""
    return DEFAULT_TEMPERATURE[operation] if answered_by_default else None


def uses_default_output_limit(choice: ModelChoice, candidate: ModelWithRetries, answered_by_default: bool) -> bool:
    """Whether Mastra's ``maxOutputTokens: 100000`` applies to this call (2.1): with the
    default choice when Mastra's default model itself answers (not the agent's model standing
    in for it), and with ``ModelByInputTokens``; never with a model the user named."""
    if choice.default:
        return answered_by_default
    return isinstance(candidate.model, ModelByInputTokens)
