"""Lifecycle hooks of Observational Memory's cycles (``observationalMemory.hooks``).

``hooks`` is an object of callables, each sync or async, each given one dict (the event):

* ``onObservationStart`` / ``onObservationEnd``: every observation cycle, whatever started it;
* ``onReflectionStart`` / ``onReflectionEnd``: every reflection cycle;
* ``onBufferingStart`` / ``onBufferingEnd``: background (``async-buffer``) cycles only,
  observation or reflection (``operation``), called *as well as* the hooks above. To count
  spend, sum ``onObservationEnd`` + ``onReflectionEnd``, never the buffering ones too.

Every event has ``threadId``, ``resourceId``, ``operation`` (``"observation"`` /
``"reflection"``), ``trigger`` (``"manual"`` | ``"turn-sync"`` | ``"async-buffer"``) and
``recordId``. End events add ``usage`` (``inputTokens``, ``outputTokens``, ``totalTokens``,
``reasoningTokens``, ``cachedInputTokens``: the sum over every model call of the cycle,
retries and escalations included, and failed calls whose error reported usage), ``model``
(the id that answered last; when none answered, the last one tried), ``calls`` (one
``{model, usage, providerMetadata, error}`` per model call, in order: a call that failed,
e.g. one a model list fell over from, has its model id, its ``error`` message, ``usage``
None unless the error reported it, and ``providerMetadata`` None), ``providerMetadata``
(the last answering call's, keyed by provider) and ``error`` (None, or the failure's message: a failed cycle, including
a background one, which never raises, is reported here). A hook that raises is logged and
ignored: the cycle goes on.

A start hook runs when the cycle really starts (after its flag is claimed), before its
first model call; a cycle with nothing to do calls neither hook.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

log = logging.getLogger(__name__)

CycleTrigger = Literal["manual", "turn-sync", "async-buffer"]
HOOK_NAMES = ("onObservationStart", "onObservationEnd", "onReflectionStart", "onReflectionEnd",
              "onBufferingStart", "onBufferingEnd")
TRANSFORM_HOOKS = ("beforeObservation", "afterObservation", "beforeReflection", "afterReflection")  # Mastra's

# What started the cycles run in this context: the manual API sets "manual", the background
# jobs "async-buffer"; a turn's own cycles are "turn-sync".
current_trigger: ContextVar[CycleTrigger] = ContextVar("om_trigger", default="turn-sync")


@dataclass(frozen=True)
class Hooks:
    callbacks: Mapping[str, Callable[..., Any]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.callbacks)

    async def call(self, name: str, event: dict[str, Any]) -> None:
        callback = self.callbacks.get(name)
        if callback is None:
            return
        try:
            result = callback(event)
            if inspect.isawaitable(result):
                await result
        except Exception:  # a user's hook never breaks memory
            log.exception("observationalMemory.hooks.%s raised; the cycle goes on", name)


NO_HOOKS = Hooks()


def parse_hooks(value: Any, fail: Callable[[str, str], ValueError]) -> Hooks:
    if value is None:
        return NO_HOOKS
    if isinstance(value, Hooks):
        return value
    if not isinstance(value, Mapping):
        raise fail("hooks", f"must be an object of callables ({', '.join(HOOK_NAMES)}), not {value!r}")
    for name, callback in value.items():
        if name in TRANSFORM_HOOKS:
            raise fail(f"hooks.{name}", "is Mastra's transform hook, not supported here (the hooks here observe "
                                        "cycles and change nothing)")
        if name not in HOOK_NAMES:
            raise fail(f"hooks.{name}", f"is not a hook (hooks: {', '.join(HOOK_NAMES)})")
        if callback is not None and not callable(callback):
            raise fail(f"hooks.{name}", f"must be callable (a function, sync or async), not {callback!r}")
    return Hooks({k: v for k, v in value.items() if v is not None})


def _empty_usage() -> dict[str, int]:
    return {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0, "reasoningTokens": 0, "cachedInputTokens": 0}


@dataclass
class CycleRun:
    """One cycle as the hooks see it: who, what, its model calls and its outcome."""

    hooks: Hooks
    operation: str  # "observation" | "reflection"
    trigger: CycleTrigger
    thread_id: str
    resource_id: str | None
    record_id: str | None
    started: bool = False
    start_called: bool = False
    error: str | None = None
    usage: dict[str, int] = field(default_factory=_empty_usage)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def base(self) -> dict[str, Any]:
        return {"threadId": self.thread_id, "resourceId": self.resource_id, "operation": self.operation,
                "trigger": self.trigger, "recordId": self.record_id}

    def add_call(self, model: str, usage: dict[str, int], metadata: dict[str, Any]) -> None:
        for key, value in usage.items():
            self.usage[key] = self.usage.get(key, 0) + value
        self.calls.append({"model": model, "usage": usage, "providerMetadata": metadata, "error": None})

    def add_failed_call(self, model: str, usage: dict[str, int] | None, error: str) -> None:
        """A model call that failed (the cycle may still succeed with the next model of a list):
        counted in ``calls`` always, and in ``usage`` when its error reported what it used."""
        for key, value in (usage or {}).items():
            self.usage[key] = self.usage.get(key, 0) + value
        self.calls.append({"model": model, "usage": usage, "providerMetadata": None, "error": error})

    async def ensure_started(self) -> None:
        """Call the start hooks once, when the cycle has really started."""
        if not self.started or self.start_called:
            return
        self.start_called = True
        event = self.base()
        await self.hooks.call("onObservationStart" if self.operation == "observation" else "onReflectionStart", event)
        if self.trigger == "async-buffer":
            await self.hooks.call("onBufferingStart", dict(event))

    async def finish(self) -> None:
        if not self.started:
            return
        await self.ensure_started()
        answered = [c for c in self.calls if c["error"] is None]
        last = answered[-1] if answered else (self.calls[-1] if self.calls else None)
        event = {**self.base(), "usage": dict(self.usage), "model": last["model"] if last else None,
                 "calls": list(self.calls), "providerMetadata": last["providerMetadata"] if last else None,
                 "error": self.error}
        await self.hooks.call("onObservationEnd" if self.operation == "observation" else "onReflectionEnd", event)
        if self.trigger == "async-buffer":
            await self.hooks.call("onBufferingEnd", dict(event))


current_run: ContextVar[CycleRun | None] = ContextVar("om_cycle_run", default=None)
