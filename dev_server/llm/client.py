"""The model seam: a small protocol, and its litellm implementation.

Routes and memory depend on ``LLMClient`` only (``resolve`` + ``stream``), so tests can
swap in the scripted model (``dev_server.llm.scripted.ScriptedModel``) and nothing above this
layer imports litellm. ``LiteLLMClient`` sends every provider call through
``litellm.acompletion(stream=True)`` and turns litellm's chunks into ``TextDelta``s
(``ReasoningDelta``s from ``reasoning_content``, ``ToolCallDelta``s from streamed
``tool_calls``), the assembled ``ToolCall``s and one final ``Finish``. The built-in local
model runs in-process and yields those events itself (``dev_server.llm.local_model.stream_local``),
with the same retries and error kinds.

Configuration (``from_settings``): provider variables come from the settings (environment
and ``.env``) and decide, per model, who answers (``dev_server.llm.models``). A request carries
the ``ResolvedModel`` its turn resolved, so a model is resolved once per turn.

litellm is imported (in a worker thread, ``dev_server.llm.offline``) the first time a model needs
it: to be resolved (a provider variable is set, or the provider is not in
``dev_server.llm.known_providers``), called, or to embed. A process whose models all answer
locally never imports it; ``status()`` says whether it is loaded.

Time and retries are ours alone: the provider SDK's own retries are off (``max_retries=0``;
left on, one 60 s timeout was retried twice underneath). ``timeout_s`` bounds each HTTP
read; ``first_token_s`` bounds the wait for the first text (per attempt); ``total_s`` bounds
the whole call, retries included; either deadline ends the call with a ``timeout`` error
(the in-process local model has neither).
A call that fails with ``connection``, ``rate_limit`` or a provider 5xx (``provider``)
before any text was streamed is retried up to ``retries`` times, after 0.25 s, 0.5 s, ...;
nothing else is retried
(a timeout already waited its deadline; text already streamed cannot be taken back).

Failure contract: ``stream`` raises only ``ModelProviderError`` (``raise ... from exc``),
whether the call fails before the first delta or mid-stream; a malformed model id is a 400
``bad_request`` there too (``resolve`` itself raises ``ValueError``). A stream that carries
no text and no other finish reason (an empty stream, or a JSON body where a stream was
asked for) is a ``response`` error, not an empty reply. Cancellation: when the consumer
stops early (``aclose()``, ``break`` + close, or task cancellation) the litellm stream is
closed in a ``finally``, which also closes the provider's HTTP response or the local
model's generator.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping
from contextlib import aclosing
from typing import Any, TypeVar

from dev_server.kernel.model import (
    Finish,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    ResolvedModel,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from dev_server.llm.content import fit_to_model
from dev_server.llm.embeddings import DEFAULT_EMBEDDER, Embedder, ProviderEmbedder, local_embedder
from dev_server.llm.errors import ModelProviderError, at_endpoint, translate
from dev_server.llm.local_model import stream_local
from dev_server.llm.models import ModelResolver
from dev_server.llm.offline import close_loop_clients, ensure_litellm, litellm_ready, loaded_litellm

log = logging.getLogger(__name__)
T = TypeVar("T")

# OpenAI finish reasons (what litellm normalises to) -> AI SDK finish reasons.
_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content-filter",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
}
RETRYABLE_KINDS = frozenset({"connection", "rate_limit", "provider"})
RETRY_BACKOFF_S = 0.25  # doubled per retry, never past the total deadline


class LiteLLMClient:
    """``LLMClient`` over litellm.

    ``environ`` holds the provider variables (the app passes the settings'
    ``provider_env``; default none, so every model answers locally); ``force_local`` sends every request to the local
    model; ``local_fallback=False`` makes a model whose provider is not configured fail
    (503 ``not_configured``) instead of answering locally. ``agent_models`` (agent id ->
    Mastra model id) are resolved and logged by ``warm_up`` and reported by ``status``.
    ``extra_kwargs`` are passed to every ``litellm.acompletion`` call and win over ours
    (the tests of this client and of litellm's loading pass ``mock_response``; other tests
    script the model with ``dev_server.llm.scripted``).
    """

    def __init__(
        self,
        *,
        force_local: bool = False,
        local_fallback: bool = True,
        environ: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
        first_token_s: float = 60.0,
        total_s: float = 300.0,
        retries: int = 0,
        agent_models: Mapping[str, str] | None = None,
        extra_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self._force_local = force_local
        self._fallback = local_fallback
        self._environ: Mapping[str, str] = environ or {}
        self._timeout_s = timeout_s
        self._first_token_s = first_token_s
        self._total_s = total_s
        self._retries = retries
        self.agent_models = dict(agent_models or {})
        self._extra_kwargs = dict(extra_kwargs or {})
        self._resolver: ModelResolver | None = None
        self._warmed = False

    @classmethod
    def from_settings(cls, settings: Any, agents: Iterable[Any] = ()) -> LiteLLMClient:
        """The client the app uses: everything from ``settings``; ``agents`` are definitions."""
        return cls(force_local=settings.local_model_only, local_fallback=settings.local_fallback,
                   environ=settings.provider_env, timeout_s=settings.model_timeout_s,
                   first_token_s=settings.model_first_token_timeout_s, total_s=settings.model_total_timeout_s,
                   retries=settings.model_retries, agent_models={a.id: a.model for a in agents})

    async def resolver(self, *mastra_ids: str) -> ModelResolver:
        """The resolver, with litellm imported and attached first if one of ``mastra_ids``
        needs it (the import runs in a thread, so a chat waits for it there, not on the loop)."""
        resolver = self._plain_resolver()
        if any(resolver.needs_litellm(mastra_id) for mastra_id in mastra_ids):
            resolver.attach(await ensure_litellm())
        return resolver

    def _plain_resolver(self) -> ModelResolver:
        """The resolver as it is (litellm attached only if it is imported already)."""
        if self._resolver is None:
            self._resolver = ModelResolver(loaded_litellm(), self._environ, force_local=self._force_local,
                                           fallback=self._fallback)
        return self._resolver

    def embeds_locally(self, mastra_id: str) -> bool | None:
        """Whether the local embedder answers for ``mastra_id`` (its provider's variables are
        not set, or every model is local), when that is known without litellm."""
        resolver = self._plain_resolver()
        if resolver.needs_litellm(mastra_id):
            return None
        try:
            return resolver.plan(mastra_id).is_local
        except ValueError:  # a malformed id: refused where the embedder is resolved
            return None

    async def resolve(self, mastra_id: str) -> ResolvedModel:
        """Where ``mastra_id`` goes. ValueError for a malformed id or an unknown provider;
        ``ModelProviderError`` (503 ``not_configured``) when it cannot be called."""
        return (await self.resolver(mastra_id)).resolve(mastra_id)

    async def embedder(self, mastra_id: str) -> Embedder:
        """Who embeds for ``mastra_id`` (``dev_server.llm.embeddings``): its provider through litellm
        when configured, else the built-in local embedder (with the fallback off, a 503)."""
        resolver = await self.resolver(mastra_id)
        try:
            resolved = resolver.resolve(mastra_id)
        except ValueError as exc:
            raise ModelProviderError(400, "bad_request", str(exc)) from exc
        if resolved.is_local:
            return local_embedder()
        return ProviderEmbedder(resolved, await ensure_litellm(), resolver.call_kwargs(resolved),
                                timeout_s=self._timeout_s, retries=self._retries, endpoint=resolver.endpoint(resolved))

    async def embed(self, texts: list[str], mastra_id: str = DEFAULT_EMBEDDER) -> Any:
        """One unit vector per text (a float32 matrix), by ``mastra_id``'s embedder."""
        return await (await self.embedder(mastra_id)).embed(texts)

    async def aclose(self) -> None:
        """At the app's shutdown: close the provider clients litellm made on this event loop
        (all of them: litellm does not say for whom; another app on this loop makes new ones)."""
        await close_loop_clients()

    def status(self) -> dict[str, Any]:
        """``/health``'s ``models``: whether the warm-up has run (the local model run once,
        every agent's model resolved, litellm imported if one of them needs
        it), who answers each agent, and whether litellm is loaded in this process."""
        resolver = self._resolver
        if not self._warmed or resolver is None or any(map(resolver.needs_litellm, self.agent_models.values())):
            return {"ready": False, "localFallback": self._fallback, "litellmLoaded": litellm_ready(), "agents": {}}
        return {"ready": True, "localFallback": self._fallback, "litellmLoaded": litellm_ready(),
                "agents": {agent_id: self._agent_status(model) for agent_id, model in self.agent_models.items()}}

    def _agent_status(self, mastra_id: str) -> dict[str, Any]:
        assert self._resolver is not None
        try:
            resolved = self._resolver.plan(mastra_id)
        except ValueError as exc:
            return {"model": mastra_id, "ready": False, "error": str(exc)}
        status: dict[str, Any] = {"model": resolved.mastra_id, "answeredBy": resolved.litellm_model,
                                  "local": resolved.is_local, "ready": not resolved.missing or resolved.is_local,
                                  "reason": resolved.reason}
        if resolved.missing:
            status["missing"] = list(resolved.missing)
        return status

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        resolved = request.model
        if not isinstance(resolved, ResolvedModel):
            try:
                resolved = await self.resolve(resolved)
            except ValueError as exc:
                raise ModelProviderError(400, "bad_request", str(exc)) from exc
        if resolved.is_local:  # answered in-process: no litellm
            litellm, credentials, endpoint = None, {}, None
        else:
            litellm = await ensure_litellm()
            resolver = await self.resolver(resolved.mastra_id)
            credentials, endpoint = resolver.call_kwargs(resolved), resolver.endpoint(resolved)
        kwargs = self._call_kwargs(request, resolved, credentials)
        loop = asyncio.get_running_loop()
        total_deadline = loop.time() + self._total_s
        retries = self._retries if request.retries is None else request.retries
        for attempt in range(retries + 1):
            streamed = False
            attempt_events = (stream_local(kwargs["messages"], kwargs.get("tools") or ()) if resolved.is_local
                              else self._attempt(litellm, kwargs, total_deadline))
            try:
                async with aclosing(attempt_events) as events:
                    async for event in events:
                        streamed = True
                        yield event
                return
            except ModelProviderError as exc:
                if streamed or attempt == retries or exc.kind not in RETRYABLE_KINDS \
                        or loop.time() >= total_deadline:
                    raise at_endpoint(exc, endpoint) from exc.__cause__
                log.info("model call failed (%s), retry %d of %d", exc.kind, attempt + 1, retries)
                await asyncio.sleep(min(RETRY_BACKOFF_S * 2 ** attempt, max(0.0, total_deadline - loop.time())))

    async def _attempt(self, litellm: Any, kwargs: dict[str, Any], total_deadline: float) -> AsyncIterator[ModelEvent]:
        loop = asyncio.get_running_loop()
        first_deadline = min(loop.time() + self._first_token_s, total_deadline)
        response = await self._before(litellm.acompletion(**kwargs), first_deadline, "first")
        finish_reason: str | None = None
        usage = Usage(0, 0)
        streamed = False
        calls: dict[int, dict[str, str]] = {}  # tool call deltas by index, assembled
        try:
            iterator = aiter(response)
            while True:
                try:
                    chunk = await self._before(anext(iterator), total_deadline if streamed else first_deadline,
                                               "total" if streamed else "first")
                except StopAsyncIteration:
                    break
                try:
                    chunk_usage = getattr(chunk, "usage", None)
                    if chunk_usage is not None:
                        usage = _usage(chunk_usage)
                    pieces: list[TextDelta | ReasoningDelta | ToolCallDelta] = []
                    for choice in chunk.choices or ():
                        finish_reason = choice.finish_reason or finish_reason
                        if choice.delta is None:
                            continue
                        reasoning = getattr(choice.delta, "reasoning_content", None)
                        if isinstance(reasoning, str) and reasoning:
                            pieces.append(ReasoningDelta(reasoning))
                        if choice.delta.content:
                            pieces.append(TextDelta(choice.delta.content))
                        for delta in getattr(choice.delta, "tool_calls", None) or ():
                            pieces.append(_add_call_delta(calls, delta))
                except Exception as exc:  # a chunk litellm let through in the wrong shape
                    raise translate(exc) from exc
                for piece in pieces:
                    streamed = True
                    yield piece
        finally:
            await response.aclose()
        if not streamed and finish_reason in (None, "stop"):
            raise ModelProviderError(502, "response", "The model provider sent an invalid response: the stream "
                                                      "carried no content (an empty stream, or not a stream at all).",
                                     usage=usage if usage.input_tokens or usage.output_tokens else None)
        for index in sorted(calls):
            call = calls[index]
            yield ToolCall(_call_id(call, index), call["name"], call["arguments"])
        if calls and finish_reason in (None, "stop"):
            finish_reason = "tool_calls"
        yield Finish(_FINISH_REASONS.get(finish_reason or "", "other"), usage)

    async def _before(self, awaitable: Awaitable[T], deadline: float, which: str) -> T:
        """``await awaitable`` by ``deadline``, litellm's exceptions translated."""
        try:
            async with asyncio.timeout_at(deadline) as scope:
                return await awaitable
        except StopAsyncIteration:
            raise
        except TimeoutError as exc:
            if not scope.expired():
                raise translate(exc) from exc
            setting, seconds = (("DEV_SERVER_MODEL_FIRST_TOKEN_TIMEOUT_S", self._first_token_s) if which == "first"
                                else ("DEV_SERVER_MODEL_TOTAL_TIMEOUT_S", self._total_s))
            what = "sent no text" if which == "first" else "did not finish"
            raise ModelProviderError(504, "timeout", f"The model provider {what} within {seconds:g} s "
                                                     f"({setting}).") from exc
        except ModelProviderError:
            raise
        except Exception as exc:
            raise translate(exc) from exc

    async def warm_up(self) -> None:
        """Resolve each agent's model (importing litellm first, ~3.6 s, only when one of them
        needs it) and run the local model once before the first chat, then log who answers
        each agent (one line per agent)."""
        try:
            await self.resolver(*self.agent_models.values())
            stream = self.stream(ModelRequest(model="local/warm-up", messages=[{"role": "user", "content": "hi"}]))
            try:
                async for _ in stream:
                    pass
            finally:
                await stream.aclose()
        finally:
            self._warmed = True  # a failed warm-up only means the first chat pays instead
        resolver = await self.resolver(*self.agent_models.values())
        for agent_id, mastra_id in self.agent_models.items():
            try:
                resolved = resolver.plan(mastra_id)
            except ValueError as exc:
                log.error("%s -> error: %s", agent_id, exc)
                continue
            level = logging.ERROR if resolved.missing and not resolved.is_local else logging.INFO
            log.log(level, "%s -> %s", agent_id, resolved.describe())

    def _call_kwargs(self, request: ModelRequest, resolved: ResolvedModel,
                     credentials: dict[str, Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": resolved.litellm_model,
            "messages": fit_to_model(list(request.messages), vision=resolved.vision, pdf_input=resolved.pdf_input,
                                     model=resolved.mastra_id, copy=not resolved.is_local),
            "stream": True,
            "stream_options": {"include_usage": True},
            "timeout": self._timeout_s,
            "max_retries": 0,  # retries are ours (see the module docstring)
        }
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if request.tools:
            kwargs["tools"] = list(request.tools)
        for key, value in (request.options or {}).items():  # never the call's own shape
            if key not in ("model", "messages", "stream", "stream_options", "tools"):
                kwargs[key] = value
        # Passed explicitly so the settings' variables (.env included, and Mastra's
        # GOOGLE_GENERATIVE_AI_API_KEY name) are used; litellm redacts keys from its logs.
        kwargs.update(credentials)
        return {**kwargs, **self._extra_kwargs}


def _usage(usage: Any) -> Usage:
    """litellm's usage, with the reasoning and cached-input details when the provider sent them."""
    output_details = getattr(usage, "completion_tokens_details", None)
    input_details = getattr(usage, "prompt_tokens_details", None)
    return Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0,
                 reasoning_tokens=getattr(output_details, "reasoning_tokens", None) or 0,
                 cached_input_tokens=getattr(input_details, "cached_tokens", None) or 0)


def _add_call_delta(calls: dict[int, dict[str, str]], delta: Any) -> ToolCallDelta:
    """Merge one streamed ``tool_calls`` delta (id and name arrive once, arguments in
    pieces) and return it as the piece the loop streams on."""
    index = getattr(delta, "index", None) or 0
    call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
    if getattr(delta, "id", None):
        call["id"] = delta.id
    piece = ""
    function = getattr(delta, "function", None)
    if function is not None:
        if getattr(function, "name", None):
            call["name"] = function.name
        if getattr(function, "arguments", None):
            piece = function.arguments
            call["arguments"] += piece
    return ToolCallDelta(_call_id(call, index), call["name"], piece)


def _call_id(call: dict[str, str], index: int) -> str:
    return call["id"] or f"call_{index}"
