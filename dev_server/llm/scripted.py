"""A scripted model: the test double of the model seam, shipped with the app.

``ScriptedModel`` is an ``LLMClient`` (``resolve`` + ``stream``, plus ``status`` and
``warm_up`` for ``/health``) that answers from a script instead of a provider, and records
every request it received, so a test says what the model answers and checks what the app
sent it. It stands where litellm and the local model stand: inject it with
``create_app(role, settings, llm=ScriptedModel(...))`` (or give it to ``TurnRunner``,
``CycleContext``, ``Memory.observe``, ...), and everything above the seam runs for real.

A script is a list of replies, one per model call, in order, or a function of the request
(``request -> Reply | str | None``, sync or async), as pydantic-ai's ``FunctionModel``. A
``str`` is a text reply. A ``Reply`` holds, in stream order:

* ``delay_s``: a wait before the first event (a slow first token; the call can be cancelled
  meanwhile), and ``piece_delay_s`` between pieces (a slow stream);
* ``reasoning`` (``ReasoningDelta``), then ``text``: a string streams in word pieces (each
  with its leading whitespace), a list of strings streams exactly those pieces;
* ``tool_calls``: ``Call(name, arguments)`` each, arguments a dict (sent as JSON) or raw
  text (invalid JSON can be scripted); ids are ``call_<n>``, ``n`` counting the tool calls
  already in the request's messages, unless ``Call(id=...)`` says otherwise. Their
  argument text streams in ``ToolCallDelta`` pieces, then come the ``ToolCall``s;
* ``error``: raised after the text (before any event when there is none): a kind
  (``"rate_limit"``, ``"auth"``, ``"timeout"``, ``"connection"``, ``"provider"``,
  ``"response"``, ...; ``dev_server.llm.errors.KIND_STATUS``) is that ``ModelProviderError`` with
  the words ``translate`` gives it; a ``ModelProviderError`` is raised as given; any other
  exception too (what a bug would raise, not a provider failure);
* else one ``Finish``: ``finish_reason`` (default ``tool-calls`` after tool calls, else
  ``stop``) and ``usage`` (default estimated as the local model estimates it).

Requests are told apart by what asks (``purpose_of``): ``agent`` (an agent's step, the
default), ``title`` (``dev_server.memory.titles``), ``observer``, ``reflector`` and ``extractor``
(Observational Memory). The positional script answers the agent's steps only; ``title=``,
``observer=``, ``reflector=``, ``extractor=`` script those. A request whose purpose has no
script, whose function returned None, or whose list ran out (``then="local"``, the default)
is answered by the built-in local model (``dev_server.llm.local_model``), so background work (a
thread's title, a buffered observation) never takes a reply meant for a turn; with
``then="fail"`` a list that ran out fails the call instead (a ``provider`` error saying so).
Nothing is retried: a scripted failure fails its call.

Recording: ``calls`` holds one ``Recorded`` per request (the ``ModelRequest`` as the app
built it, before any provider fitting: messages, tools, temperature, max tokens, options;
its purpose; whether the script answered it), ``requests`` the requests alone, and
``requests_for(purpose)`` one purpose's; ``pending`` counts the replies not played yet.

Models resolve as the local model does when no key is set (``local=True``: ``is_local``,
so replies carry ``local: true``, and Observational Memory observes with the agent's own
model); ``local=False`` resolves them as configured providers (``answeredBy`` ``scripted/...``).

From a server process: ``DEV_SERVER_SCRIPTED_MODEL`` names a JSON script file
(``dev_server.llm.scripted_file``), used only when set, and said at start and in ``/health``
(``models.scripted``). The file is a list of replies, or an object ``{"replies": [...],
"title": [...], "observer": [...], "reflector": [...], "extractor": [...], "then": "local",
"local": true, "record": "requests.jsonl"}``; a reply is a string or ``{"text", "reasoning",
"toolCalls": [{"name", "arguments", "id"}], "error": kind | {"kind", "message"}, "delayS",
"pieceDelayS", "finishReason", "usage": {"inputTokens", "outputTokens"}}``. ``record`` (a
path relative to the script's directory) gets one JSON line per request. Each gateway
worker plays its own copy of the script: use ``DEV_SERVER_WORKERS=1``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

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
from dev_server.kernel.tokenx import estimate_tokens
from dev_server.llm.base import ModelClientBase
from dev_server.llm.content import fit_to_model
from dev_server.llm.errors import ModelProviderError, provider_error
from dev_server.llm.local_model import is_title_request, message_text, stream_local
from dev_server.llm.local_observer import is_extractor_request, is_observer_request, is_reflector_request
from dev_server.llm.models import split_model_id
from dev_server.llm.offline import litellm_ready

Purpose = Literal["agent", "title", "observer", "reflector", "extractor"]
PURPOSES: tuple[Purpose, ...] = ("agent", "title", "observer", "reflector", "extractor")
_PIECE = re.compile(r"\s*\S+|\s+")  # joined, the pieces are the text again
_ARGUMENT_PIECES = 3


@dataclass(frozen=True)
class Call:
    """A tool call to script: ``arguments`` a dict (sent as JSON) or the raw argument text."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    @property
    def argument_text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(dict(self.arguments))


@dataclass(frozen=True)
class Reply:
    """What one model call answers (see the module docstring for the order)."""

    text: str | Sequence[str] = ""
    tool_calls: Sequence[Call] = ()
    reasoning: str = ""
    error: str | BaseException | None = None
    delay_s: float = 0.0
    piece_delay_s: float = 0.0
    finish_reason: str | None = None
    usage: Usage | None = None

    def __post_init__(self) -> None:
        if isinstance(self.error, str):
            provider_error(self.error)  # an unknown kind fails here, not in the middle of a test's turn

    @property
    def pieces(self) -> tuple[str, ...]:
        return tuple(_PIECE.findall(self.text)) if isinstance(self.text, str) else tuple(self.text)


Answer = Reply | str | None
ScriptFunction = Callable[[ModelRequest], Answer | Awaitable[Answer]]
Script = Sequence[Reply | str] | ScriptFunction


@dataclass(frozen=True)
class Recorded:
    """One request the scripted model received."""

    request: ModelRequest
    purpose: Purpose
    scripted: bool  # whether the script answered it (else the local model did, or a script run out failed it)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.request.messages

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.request.tools]

    @property
    def system_text(self) -> str:
        return "\n".join(message_text(m.get("content")) for m in self.messages if m.get("role") == "system")

    @property
    def last_user_text(self) -> str:
        return next((message_text(m.get("content")) for m in reversed(self.messages) if m.get("role") == "user"), "")


def purpose_of(messages: Sequence[dict[str, Any]]) -> Purpose:
    """Who asks: the app's own prompts are recognised as the local model recognises them."""
    if is_extractor_request(messages):
        return "extractor"
    if is_reflector_request(messages):
        return "reflector"
    if is_observer_request(messages):
        return "observer"
    if is_title_request(messages):
        return "title"
    return "agent"


class ScriptedModel(ModelClientBase):
    """An ``LLMClient`` that answers from a script and records every request (module docstring);
    it embeds with the built-in local model and holds nothing to close (``ModelClientBase``)."""

    def __init__(self, script: Script | None = None, *, title: Script | None = None, observer: Script | None = None,
                 reflector: Script | None = None, extractor: Script | None = None,
                 then: Literal["local", "fail"] = "local", local: bool = True,
                 record_to: Path | None = None, agent_models: Mapping[str, str] | None = None) -> None:
        if then not in ("local", "fail"):
            raise ValueError(f"then must be 'local' or 'fail', got {then!r}")
        given = {"agent": script, "title": title, "observer": observer, "reflector": reflector,
                 "extractor": extractor}
        self._scripts: dict[Purpose, ScriptFunction | list[Reply | str]] = {
            purpose: value if callable(value) else [value] if isinstance(value, (str, Reply)) else list(value)
            for purpose, value in given.items() if value is not None}
        self._then = then
        self._local = local
        self._record_to = record_to
        self.agent_models = dict(agent_models or {})
        self.calls: list[Recorded] = []
        self._served: dict[str, int] = {}

    @property
    def requests(self) -> list[ModelRequest]:
        return [call.request for call in self.calls]

    def requests_for(self, purpose: Purpose) -> list[ModelRequest]:
        return [call.request for call in self.calls if call.purpose == purpose]

    @property
    def pending(self) -> int:
        """Replies of the scripts' lists not played yet."""
        return sum(len(script) for script in self._scripts.values() if isinstance(script, list))

    async def resolve(self, mastra_id: str) -> ResolvedModel:
        provider, model_id = split_model_id(mastra_id)  # ValueError for a malformed id, as the real client
        canonical = f"{provider}/{model_id}"
        return ResolvedModel(canonical, provider, model_id, f"scripted/{canonical}", is_local=self._local,
                             reason="scripted model", vision=True, pdf_input=True,
                             capabilities_known=True)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if not isinstance(request.model, ResolvedModel):
            try:
                await self.resolve(request.model)
            except ValueError as exc:
                raise ModelProviderError(400, "bad_request", str(exc)) from exc
        purpose = purpose_of(request.messages)
        try:
            reply = await self._next_reply(purpose, request)
        except BaseException:
            self._record(Recorded(request, purpose, scripted=False))
            raise
        self._record(Recorded(request, purpose, scripted=reply is not None))
        if reply is None:
            messages = fit_to_model(list(request.messages), vision=True, pdf_input=True, model=_model_id(request))
            answer = stream_local(messages, request.tools)
        else:
            answer = _play(reply, request)
        async with aclosing(answer) as events:
            async for event in events:
                yield event

    async def _next_reply(self, purpose: Purpose, request: ModelRequest) -> Reply | None:
        script = self._scripts.get(purpose)
        if script is None:
            return None
        if callable(script):
            answer = script(request)
            if inspect.isawaitable(answer):
                answer = await answer
        elif script:
            answer = script.pop(0)
        elif self._then == "fail":
            served = self._served.get(purpose, 0)
            raise provider_error("provider", f"The scripted model has no {purpose} reply left "
                                             f"(it answered {served}).")
        else:
            answer = None
        if answer is None:
            return None
        self._served[purpose] = self._served.get(purpose, 0) + 1
        return Reply(text=answer) if isinstance(answer, str) else answer

    def _record(self, recorded: Recorded) -> None:
        self.calls.append(recorded)
        if self._record_to is not None:
            line = {"purpose": recorded.purpose, "scripted": recorded.scripted, "model": _model_id(recorded.request),
                    "messages": recorded.messages, "tools": list(recorded.request.tools),
                    "temperature": recorded.request.temperature, "maxTokens": recorded.request.max_tokens,
                    "options": recorded.request.options}
            with self._record_to.open("a", encoding="utf-8") as out:  # one write per line: whole lines
                out.write(json.dumps(line, default=str) + "\n")

    def status(self) -> dict[str, Any]:
        """``/health``'s ``models``: always ready; ``scripted`` says what the script holds."""
        agents = {agent_id: {"model": mastra_id, "answeredBy": f"scripted/{mastra_id}", "local": self._local,
                             "ready": True, "reason": "scripted model"}
                  for agent_id, mastra_id in self.agent_models.items()}
        return {"ready": True, "localFallback": self._then == "local", "litellmLoaded": litellm_ready(),
                "scripted": {"pending": self.pending, "requests": len(self.calls)}, "agents": agents}

    async def warm_up(self) -> None:
        """Nothing to load: usage is estimated (``dev_server.kernel.tokenx``), without a tokenizer."""


async def _play(reply: Reply, request: ModelRequest) -> AsyncIterator[ModelEvent]:
    if reply.delay_s:
        await asyncio.sleep(reply.delay_s)
    pieces: list[TextDelta | ReasoningDelta] = [ReasoningDelta(reply.reasoning)] if reply.reasoning else []
    pieces += [TextDelta(piece) for piece in reply.pieces]
    for index, piece in enumerate(pieces):
        if index and reply.piece_delay_s:
            await asyncio.sleep(reply.piece_delay_s)
        yield piece
    if reply.error is not None:
        raise provider_error(reply.error) if isinstance(reply.error, str) else reply.error
    first_id = _calls_in(request.messages)
    calls = [ToolCall(call.id or f"call_{first_id + index}", call.name, call.argument_text)
             for index, call in enumerate(reply.tool_calls)]
    for call in calls:
        for piece in _argument_pieces(call.arguments):
            yield ToolCallDelta(call.id, call.name, piece)
    for call in calls:
        yield call
    usage = reply.usage or Usage(sum(estimate_tokens(message_text(m.get("content"))) for m in request.messages),
                                 estimate_tokens("".join(reply.pieces)))
    yield Finish(reply.finish_reason or ("tool-calls" if calls else "stop"), usage)


def _calls_in(messages: Sequence[dict[str, Any]]) -> int:
    return sum(len(m.get("tool_calls") or ()) for m in messages if m.get("role") == "assistant")


def _argument_pieces(arguments: str) -> list[str]:
    size = max(1, -(-len(arguments) // _ARGUMENT_PIECES))
    return [arguments[i:i + size] for i in range(0, len(arguments), size)] or [""]


def _model_id(request: ModelRequest) -> str:
    return request.model.mastra_id if isinstance(request.model, ResolvedModel) else request.model
