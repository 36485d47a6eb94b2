"""dev_server.llm: model-id mapping, the local model, litellm streaming, error translation, offline start.

Async tests run on anyio's pytest plugin (asyncio backend, see conftest). Nothing here touches
the network: the local model is in-process, and non-local ids use litellm's ``mock_response``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from dev_server.kernel.model import Finish, ModelRequest, TextDelta, Usage
from dev_server.kernel.tokenx import estimate_tokens
from dev_server.llm import LiteLLMClient, ModelProviderError, ModelResolver, prepare_litellm, translate
from dev_server.llm.local_model import compose_reply

REPO = Path(__file__).resolve().parents[1]
FAKE_KEY = "sk-test-not-a-real-key-0123456789"


@pytest.fixture(scope="module")
def litellm() -> Any:
    return prepare_litellm()


def resolve_model(mastra_id: str, *, environ: dict[str, str], force_local: bool = False) -> Any:
    return ModelResolver(prepare_litellm(), environ, force_local=force_local).resolve(mastra_id)


def resolve(client: LiteLLMClient, mastra_id: str) -> Any:
    return asyncio.run(client.resolve(mastra_id))


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def system(text: str) -> dict[str, str]:
    return {"role": "system", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


async def collect(client: LiteLLMClient, request: ModelRequest) -> list[TextDelta | Finish]:
    return [event async for event in client.stream(request)]


async def local_answer(messages: list[dict[str, Any]]) -> str:
    events = await collect(LiteLLMClient(environ={}), ModelRequest("local/echo", messages))
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def check_shape(events: list[TextDelta | Finish]) -> Finish:
    """Zero or more TextDelta, then exactly one Finish, last."""
    assert events and isinstance(events[-1], Finish)
    assert all(isinstance(e, TextDelta) for e in events[:-1])
    return events[-1]


# -- model ids -------------------------------------------------------------------------------

KEYS = {
    "OPENAI_API_KEY": FAKE_KEY,
    "ANTHROPIC_API_KEY": FAKE_KEY,
    "GEMINI_API_KEY": FAKE_KEY,
    "GROQ_API_KEY": FAKE_KEY,
    "MISTRAL_API_KEY": FAKE_KEY,
    "DEEPSEEK_API_KEY": FAKE_KEY,
    "XAI_API_KEY": FAKE_KEY,
    "OPENROUTER_API_KEY": FAKE_KEY,
}


@pytest.mark.parametrize(
    ("mastra_id", "litellm_model"),
    [
        ("openai/gpt-4o-mini", "openai/gpt-4o-mini"),
        ("anthropic/claude-3-5-haiku-latest", "anthropic/claude-3-5-haiku-latest"),
        ("google/gemini-2.5-flash", "gemini/gemini-2.5-flash"),
        ("groq/llama-3.1-8b-instant", "groq/llama-3.1-8b-instant"),
        ("mistral/mistral-small-latest", "mistral/mistral-small-latest"),
        ("deepseek/deepseek-chat", "deepseek/deepseek-chat"),
        ("xai/grok-3-mini", "xai/grok-3-mini"),
        ("openrouter/meta-llama/llama-3.1-8b-instruct", "openrouter/meta-llama/llama-3.1-8b-instruct"),
    ],
)
def test_mapping_with_key(mastra_id: str, litellm_model: str) -> None:
    resolved = resolve_model(mastra_id, environ=KEYS)
    assert resolved.litellm_model == litellm_model
    assert not resolved.is_local
    assert f"{resolved.provider}/{resolved.model_id}" == mastra_id


@pytest.mark.parametrize("bad", ["", "gpt-4o", "openai/", "/gpt-4o", "/", "  ", "nosuch/model"])
def test_invalid_ids_raise_value_error(bad: str) -> None:
    with pytest.raises(ValueError):
        resolve_model(bad, environ=KEYS)
    with pytest.raises(ValueError):
        resolve(LiteLLMClient(environ=KEYS), bad)


def test_resolve_falls_back_to_local_without_key() -> None:
    resolved = resolve(LiteLLMClient(environ={}), "openai/gpt-4o-mini")
    assert resolved.is_local and resolved.litellm_model.startswith("local/")
    assert (resolved.provider, resolved.model_id) == ("openai", "gpt-4o-mini")


def test_resolve_uses_provider_when_key_present() -> None:
    resolved = resolve(LiteLLMClient(environ={"OPENAI_API_KEY": FAKE_KEY}), "openai/gpt-4o-mini")
    assert (resolved.mastra_id, resolved.provider, resolved.model_id, resolved.litellm_model, resolved.is_local) == (
        "openai/gpt-4o-mini", "openai", "gpt-4o-mini", "openai/gpt-4o-mini", False)
    assert FAKE_KEY not in repr(resolved)


def test_resolve_force_local_and_local_provider() -> None:
    forced = resolve(LiteLLMClient(force_local=True, environ=KEYS), "anthropic/claude-3-5-haiku-latest")
    assert forced.is_local and forced.litellm_model.startswith("local/")
    local = resolve(LiteLLMClient(environ=KEYS), "local/echo")
    assert local.is_local and local.litellm_model == "local/echo"


@pytest.mark.parametrize("key_name", ["GOOGLE_GENERATIVE_AI_API_KEY", "GEMINI_API_KEY"])
def test_google_accepts_either_key_name(key_name: str) -> None:
    resolved = resolve(LiteLLMClient(environ={key_name: FAKE_KEY}), "google/gemini-2.5-flash")
    assert not resolved.is_local and resolved.litellm_model == "gemini/gemini-2.5-flash"


# -- the local model -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_local_stream_is_deterministic_and_well_formed() -> None:
    messages = [user("hello there"), assistant("hi"), user("how are you today?")]
    client = LiteLLMClient(environ={})
    first = await collect(client, ModelRequest("local/echo", messages))
    second = await collect(client, ModelRequest("local/echo", messages))
    assert first == second
    finish = check_shape(first)
    deltas = [e.text for e in first[:-1]]
    assert len(deltas) > 5 and any(d.startswith(" ") for d in deltas)  # word-ish pieces with spaces
    text = "".join(deltas)
    assert text == '[local model] You said: "how are you today?". I can see 2 earlier messages in this conversation.'
    assert finish.finish_reason == "stop"
    assert finish.usage == Usage(input_tokens=estimate_tokens("hello there") + estimate_tokens("hi")
                                 + estimate_tokens("how are you today?"), output_tokens=estimate_tokens(text))


@pytest.mark.anyio
async def test_provider_without_key_answers_locally() -> None:
    events = await collect(LiteLLMClient(environ={}), ModelRequest("openai/gpt-4o-mini", [user("ping")]))
    assert "".join(e.text for e in events[:-1]).startswith("[local model] ")
    check_shape(events)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "question",
    [
        "What did I say earlier?",
        "what have I told you so far",
        "Can you remind me what I said before?",
        "WHAT DID I ASK PREVIOUSLY?",
        "Show me my previous messages",
    ],
)
async def test_local_recalls_earlier_user_messages(question: str) -> None:
    history = [
        {"role": "system", "content": "You are terse."},
        user("I like green tea"),
        assistant("Noted."),
        user("I live in Oslo"),
        assistant("Nice."),
        user(question),
    ]
    text = await local_answer(history)
    assert text.startswith("[local model] Earlier you said (2 messages):")
    assert text.index('"I like green tea"') < text.index('"I live in Oslo"')
    assert "system instructions" in text


@pytest.mark.anyio
async def test_local_recall_without_history() -> None:
    text = await local_answer([user("What did I say earlier?")])
    assert text == "[local model] I don't see any earlier messages from you in this conversation."


@pytest.mark.anyio
@pytest.mark.parametrize("question", ["What is my name?", "who am I?", "Do you remember my name?"])
async def test_local_recalls_name(question: str) -> None:
    history = [user("Hi! My name is Ada Lovelace, nice to meet you."), assistant("Hello."), user(question)]
    assert await local_answer(history) == "[local model] Your name is Ada Lovelace."


@pytest.mark.anyio
async def test_local_name_unknown_and_latest_name_wins() -> None:
    assert "haven't told me your name" in await local_answer([user("what's my name?")])
    history = [user("my name is bob"), user("Actually, call me Robert."), user("What is my name?")]
    assert await local_answer(history) == "[local model] Your name is Robert."


def test_compose_reply_statement_is_not_a_recall_question() -> None:
    reply = compose_reply([user("first"), user("What I said is that cats are great")])
    assert reply.text.startswith('[local model] You said: "What I said is that cats are great". I can see 1 ')
    assert "".join(reply.pieces) == reply.text


@pytest.mark.anyio
async def test_local_model_counts_its_usage_and_streams_without_litellm(monkeypatch: Any) -> None:
    import litellm as litellm_module

    async def no_litellm(**_: Any) -> Any:
        raise AssertionError("the local model must not go through litellm")

    monkeypatch.setattr(litellm_module, "acompletion", no_litellm)
    events = await collect(LiteLLMClient(environ={}), ModelRequest("local/echo", [user("hi there")]))
    finish = check_shape(events)
    text = "".join(e.text for e in events[:-1])
    assert text == '[local model] You said: "hi there". I can see 0 earlier messages in this conversation.'
    assert (finish.usage.input_tokens, finish.usage.output_tokens) == (2, estimate_tokens(text))


def test_the_local_model_estimates_a_repeated_input_once(monkeypatch: Any) -> None:
    """A turn's input is the last turn's plus two messages (with Observational Memory a window of
    hundreds): the usage's input tokens estimate each message's text once, not at every call."""
    import dev_server.llm.local_model as local_model

    estimated: list[str] = []

    def counting(text: str) -> int:
        estimated.append(text)
        return estimate_tokens(text)

    monkeypatch.setattr(local_model, "estimate_tokens", counting)
    window = [user(f"window message {i} {id(estimated)}") for i in range(40)]
    first = compose_reply(window)
    assert sum(1 for t in estimated if t.startswith("window message")) == 40
    again = compose_reply([*window, user(f"one more {id(estimated)}")])
    assert sum(1 for t in estimated if t.startswith("window message")) == 40  # none estimated again
    assert again.input_tokens == first.input_tokens + estimate_tokens(f"one more {id(estimated)}")
    observations = f"observed {id(estimated)} " * 8_000  # a system message of Observational Memory's size
    compose_reply([system(observations), user("hi")]), compose_reply([system(observations), user("hi again")])
    assert estimated.count(observations) + estimated.count(observations.strip()) == 1
    huge = "long " * 60_000  # any length: the memo keeps a count, not the text
    compose_reply([user(huge)]), compose_reply([user(huge)])
    assert estimated.count(huge.strip()) + estimated.count(huge) == 1


# -- litellm path: mock responses and errors ----------------------------------------------


@pytest.mark.anyio
async def test_mock_response_through_a_provider_model() -> None:
    client = LiteLLMClient(environ={"OPENAI_API_KEY": FAKE_KEY}, extra_kwargs={"mock_response": "Hello from the mock"})
    events = await collect(client, ModelRequest("openai/gpt-4o-mini", [user("hi")], temperature=0.2, max_tokens=20))
    finish = check_shape(events)
    assert "".join(e.text for e in events[:-1]) == "Hello from the mock"
    assert finish.finish_reason == "stop" and finish.usage.output_tokens > 0


@pytest.mark.anyio
async def test_call_kwargs(litellm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []
    real = litellm.acompletion

    async def spy(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return await real(**kwargs)

    monkeypatch.setattr(litellm, "acompletion", spy)
    env = {"GOOGLE_GENERATIVE_AI_API_KEY": FAKE_KEY}
    client = LiteLLMClient(environ=env, extra_kwargs={"mock_response": "ok"})
    await collect(client, ModelRequest("google/gemini-2.5-flash", [user("hi")], temperature=0.0, max_tokens=5))
    local_events = await collect(LiteLLMClient(environ={}), ModelRequest("google/gemini-2.5-flash", [user("hi")]))
    [provider_call] = seen  # the local model answered in-process
    assert provider_call["model"] == "gemini/gemini-2.5-flash" and provider_call["api_key"] == FAKE_KEY
    assert (provider_call["temperature"], provider_call["max_tokens"], provider_call["stream"]) == (0.0, 5, True)
    assert "".join(e.text for e in local_events[:-1]).startswith("[local model] ")


def _errors(litellm: Any) -> list[tuple[Exception, int, str]]:
    p, m = "openai", "gpt-4o-mini"
    return [
        (litellm.RateLimitError(message="slow down", llm_provider=p, model=m), 429, "rate_limit"),
        (litellm.AuthenticationError(message=f"Incorrect API key {FAKE_KEY}", llm_provider=p, model=m), 401, "auth"),
        (litellm.Timeout(message="took too long", model=m, llm_provider=p), 504, "timeout"),
        (litellm.APIConnectionError(message="connection reset", llm_provider=p, model=m), 502, "connection"),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("case", range(4))
async def test_mock_exceptions_become_model_provider_errors(litellm: Any, case: int) -> None:
    exc, status, kind = _errors(litellm)[case]
    client = LiteLLMClient(environ={"OPENAI_API_KEY": FAKE_KEY}, extra_kwargs={"mock_response": exc})
    with pytest.raises(ModelProviderError) as info:
        await collect(client, ModelRequest("openai/gpt-4o-mini", [user("hi")]))
    assert (info.value.status, info.value.kind) == (status, kind)
    assert FAKE_KEY not in info.value.message and "(openai)" in info.value.message
    assert info.value.__cause__ is not None


def test_translate_table(litellm: Any) -> None:
    p, m = "anthropic", "claude"
    cases = [
        (litellm.ContextWindowExceededError(message="too long", model=m, llm_provider=p), 400, "bad_request"),
        (litellm.BadRequestError(message="bad", model=m, llm_provider=p), 400, "bad_request"),
        (litellm.NotFoundError(message="no such model", model=m, llm_provider=p), 404, "not_found"),
        (litellm.APIError(status_code=500, message="oops", llm_provider=p, model=m), 502, "provider"),
        (litellm.InternalServerError(message="oops", llm_provider=p, model=m), 502, "provider"),
        (ValueError("unexpected"), 502, "provider"),
        (
            litellm.exceptions.MidStreamFallbackError(
                message="wrapped", model=m, llm_provider=p,
                original_exception=litellm.RateLimitError(message="x", llm_provider=p, model=m),
            ),
            429,
            "rate_limit",
        ),
    ]
    for exc, status, kind in cases:
        translated = translate(exc)
        assert (translated.status, translated.kind) == (status, kind), exc
    already = ModelProviderError(400, "bad_request", "x")
    assert translate(already) is already


@pytest.mark.anyio
async def test_fail_trigger_raises_mid_stream_after_two_deltas() -> None:
    received: list[TextDelta | Finish] = []
    with pytest.raises(ModelProviderError) as info:
        async for event in LiteLLMClient(environ={}).stream(ModelRequest("local/echo", [user("boom [[fail]]")])):
            received.append(event)
    assert [type(e) for e in received] == [TextDelta, TextDelta]
    assert (info.value.status, info.value.kind) == (502, "connection")


@pytest.mark.anyio
async def test_invalid_id_in_stream_is_a_400_model_provider_error() -> None:
    with pytest.raises(ModelProviderError) as info:
        await collect(LiteLLMClient(environ={}), ModelRequest("gpt-4o", [user("hi")]))
    assert (info.value.status, info.value.kind) == (400, "bad_request")


# -- cancellation ----------------------------------------------------------------------------


PROVIDER_MOCK = {"environ": {"OPENAI_API_KEY": FAKE_KEY}, "extra_kwargs": {"mock_response": "word " * 200}}
# (client settings, model, message): a provider stream through litellm, and the local model.
STREAMS = {"litellm": (PROVIDER_MOCK, "openai/gpt-4o-mini", "hi"),
           "local": ({"environ": {}}, "local/echo", "talk slowly [[slow]]")}


@pytest.fixture
def opened_streams(litellm: Any, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The generator behind every model stream opened: litellm's stream wrapper's own
    stream for a provider, the local model's generator for the local one."""
    import dev_server.llm.client as client_module

    opened: list[Any] = []
    real_acompletion, real_local = litellm.acompletion, client_module.stream_local

    async def spy(**kwargs: Any) -> Any:
        wrapper = await real_acompletion(**kwargs)
        opened.append(wrapper)
        return wrapper

    def local_spy(*args: Any) -> Any:
        opened.append(real_local(*args))
        return opened[-1]

    monkeypatch.setattr(litellm, "acompletion", spy)
    monkeypatch.setattr(client_module, "stream_local", local_spy)
    return opened


async def _assert_closed(opened: list[Any], tasks_before: set[asyncio.Task[Any]]) -> None:
    stream, = opened
    if hasattr(stream, "completion_stream"):
        assert stream.completion_stream is None  # CustomStreamWrapper.aclose() ran
    else:
        assert stream.ag_frame is None  # the local model's generator was finalised
    await asyncio.sleep(0.1)  # let litellm's own fire-and-forget logging tasks finish
    assert asyncio.all_tasks() - tasks_before == set()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", STREAMS)
async def test_aclose_closes_the_model_stream(opened_streams: list[Any], kind: str) -> None:
    settings, model, text = STREAMS[kind]
    before = asyncio.all_tasks()
    stream = LiteLLMClient(**settings).stream(ModelRequest(model, [user(text)]))
    first = await anext(stream)
    assert isinstance(first, TextDelta)
    await stream.aclose()  # type: ignore[attr-defined]
    await _assert_closed(opened_streams, before)


@pytest.mark.anyio
async def test_cancelling_the_consumer_closes_the_model_stream(opened_streams: list[Any]) -> None:
    settings, model, text = STREAMS["local"]  # slow, so the cancellation lands inside the model's stream
    got_one = asyncio.Event()

    async def consume() -> None:
        async for _ in LiteLLMClient(**settings).stream(ModelRequest(model, [user(text)])):
            got_one.set()

    before = asyncio.all_tasks()
    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_one.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _assert_closed(opened_streams, before)


# -- offline start ---------------------------------------------------------------------------

# Runs in a fresh interpreter so import-time behaviour is observed. Every IPv4/IPv6 connect
# and every DNS lookup is refused and recorded at the socket layer, which catches httpx,
# aiohttp and urllib alike (proxy variables would not: a proxy on 127.0.0.1 is a connect that
# cannot be told apart, and clients honour them differently).
OFFLINE_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, socket, sys, time
    attempts = []
    def refuse(kind):
        def guard(*args, **kwargs):
            attempts.append([kind, repr(args[:2])[:120]])
            raise OSError("network disabled by test")
        return guard
    real_connect = socket.socket.connect
    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            return refuse("connect")(self, address)
        return real_connect(self, address)
    socket.socket.connect = connect
    socket.socket.connect_ex = connect
    socket.getaddrinfo = refuse("getaddrinfo")

    import dev_server.llm
    import dev_server.kernel.model
    imported_eagerly = "litellm" in sys.modules
    t0 = time.perf_counter()
    dev_server.llm.prepare_litellm()
    t1 = time.perf_counter()

    async def run():
        client = dev_server.llm.LiteLLMClient(environ={})
        request = dev_server.kernel.model.ModelRequest("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}])
        return [e async for e in client.stream(request)]

    events = asyncio.run(run())
    t2 = time.perf_counter()
    clean = list(attempts)
    try:
        socket.create_connection(("example.com", 443), timeout=1)  # the guard must catch this
    except OSError:
        pass
    print(json.dumps({
        "imported_eagerly": imported_eagerly, "attempts": clean, "control": attempts[len(clean):],
        "text": "".join(getattr(e, "text", "") for e in events), "prepare_s": t1 - t0, "stream_s": t2 - t1,
    }))
    """
)


def test_import_and_local_completion_make_no_network_access() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("LITELLM_") or k.endswith("_API_KEY") or "proxy" in k.lower() or k.startswith("TIKTOKEN"))
    }
    result = subprocess.run(
        [sys.executable, "-c", OFFLINE_SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["imported_eagerly"] is False  # importing dev_server.llm does not import litellm
    assert report["attempts"] == []
    assert report["control"], "the socket guard did not see a deliberate connection"
    assert report["text"].startswith("[local model] ")
