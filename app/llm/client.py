"""The model seam: a small protocol, and its litellm implementation.

Routes and memory depend on ``LLMClient`` only (``resolve`` + ``stream``), so tests can
swap in a scripted fake and nothing above this layer imports litellm. ``LiteLLMClient``
sends every call, the local model's included, through ``litellm.acompletion(stream=True)``
and turns litellm's chunks into ``TextDelta``s and one final ``Finish``.

Failure contract: ``stream`` raises only ``ModelProviderError`` (``raise ... from exc``),
whether the call fails before the first delta or mid-stream; a malformed model id is a 400
``bad_request`` there too (``resolve`` itself raises ``ValueError``). Cancellation: when the
consumer stops early (``aclose()``, ``break`` + close, or task cancellation) the litellm
stream is closed in a ``finally``, which also closes the provider's HTTP response or the
local model's generator.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from app.llm.errors import ModelProviderError, translate
from app.llm.models import api_key_for, resolve_model
from app.llm.offline import ensure_litellm
from app.llm.types import Finish, ModelRequest, ResolvedModel, TextDelta, Usage

# OpenAI finish reasons (what litellm normalises to) -> AI SDK finish reasons.
_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content-filter",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
}


class LLMClient(Protocol):
    def resolve(self, mastra_id: str) -> ResolvedModel: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | Finish]: ...


class LiteLLMClient:
    """``LLMClient`` over litellm.

    ``force_local`` sends every request to the local model; ``environ`` is where provider
    keys are looked up (default: the live ``os.environ``); ``extra_kwargs`` are passed to
    every ``litellm.acompletion`` call and win over ours (tests pass ``mock_response``).
    """

    def __init__(
        self,
        *,
        force_local: bool = False,
        environ: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
        extra_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self._force_local = force_local
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self._timeout_s = timeout_s
        self._extra_kwargs = dict(extra_kwargs or {})

    def resolve(self, mastra_id: str) -> ResolvedModel:
        return resolve_model(mastra_id, environ=self._environ, force_local=self._force_local)

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | Finish]:
        try:
            resolved = self.resolve(request.model)
        except ValueError as exc:
            raise ModelProviderError(400, "bad_request", str(exc)) from exc
        litellm = await ensure_litellm()
        try:
            response = await litellm.acompletion(**self._call_kwargs(request, resolved))
        except Exception as exc:
            raise translate(exc) from exc

        finish_reason: str | None = None
        usage = Usage(0, 0)
        try:
            iterator = aiter(response)
            while True:
                try:
                    chunk = await anext(iterator)
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    raise translate(exc) from exc
                chunk_usage = getattr(chunk, "usage", None)
                if chunk_usage is not None:
                    usage = Usage(chunk_usage.prompt_tokens or 0, chunk_usage.completion_tokens or 0)
                for choice in chunk.choices or ():
                    finish_reason = choice.finish_reason or finish_reason
                    text = choice.delta.content if choice.delta is not None else None
                    if text:
                        yield TextDelta(text)
        finally:
            await response.aclose()
        yield Finish(_FINISH_REASONS.get(finish_reason or "", "other"), usage)

    async def warm_up(self) -> None:
        """Pay litellm's import (~3.6 s) and first-call setup (~0.4 s) before the first chat."""
        await ensure_litellm()
        stream = self.stream(ModelRequest(model="local/warm-up", messages=[{"role": "user", "content": "hi"}]))
        try:
            async for _ in stream:
                pass
        finally:
            await stream.aclose()

    def _call_kwargs(self, request: ModelRequest, resolved: ResolvedModel) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": resolved.litellm_model,
            "messages": list(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            "timeout": self._timeout_s,
        }
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if not resolved.is_local:
            # Passed explicitly so an injected environ (and Mastra's GOOGLE_GENERATIVE_AI_API_KEY
            # name, which litellm does not read) work; litellm redacts it from its logs.
            kwargs["api_key"] = api_key_for(resolved.provider, self._environ)
        return {**kwargs, **self._extra_kwargs}
