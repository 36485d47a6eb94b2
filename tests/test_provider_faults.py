"""Provider faults, against a fake OpenAI-compatible server on localhost (tests/fake_provider.py).

Two layers: ``LiteLLMClient`` directly (every fault mode: error kinds, messages, attempts),
and the real gateway process pointed at the fake with ``OPENAI_BASE_URL`` (what a client
sees, and what is stored). Deadlines are 1 s so the suite stays fast; nothing asserts a
wall-clock time: timeouts are recognised by their kind and message, retries by the number
of requests the fake received.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dev_server.kernel.model import Finish, ModelRequest, TextDelta
from dev_server.llm import LiteLLMClient, ModelProviderError
from tests.fake_provider import INBAND_MESSAGE, REPLY, FakeProvider
from tests.kit.local_http import local_http
from tests.kit.servers import ProcessServer, Servers
from tests.support import sqlite_rows, user_message, wait_models_ready

DUMMY_KEY = "sk-dummy-for-the-fake-provider"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@pytest.fixture(autouse=True)
def reset_count(fake: FakeProvider) -> None:
    fake.requests = 0
    fake.bodies.clear()
    fake.headers.clear()


def client(fake: FakeProvider, **options: Any) -> LiteLLMClient:
    """Deadlines far from any healthy call on a loaded machine (a CI run shares two cores
    with the suite's other workers): the tests whose subject is a deadline set it short."""
    settings = {"first_token_s": 30.0, "total_s": 60.0, "timeout_s": 30.0, "retries": 0, **options}
    return LiteLLMClient(environ={"OPENAI_API_KEY": DUMMY_KEY, "OPENAI_BASE_URL": fake.base_url}, **settings)


async def run(llm: LiteLLMClient, text: str) -> tuple[list[TextDelta | Finish], ModelProviderError | None]:
    events: list[TextDelta | Finish] = []
    try:
        async for event in llm.stream(ModelRequest("openai/gpt-4o-mini", [{"role": "user", "content": text}])):
            events.append(event)
    except ModelProviderError as exc:
        return events, exc
    return events, None


# -- the client ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_healthy_stream_through_openai_base_url(fake: FakeProvider) -> None:
    events, error = await run(client(fake), "hello")
    assert error is None and "".join(e.text for e in events if isinstance(e, TextDelta)) == REPLY
    assert isinstance(events[-1], Finish) and events[-1].finish_reason == "stop"
    assert fake.requests == 1


@pytest.mark.anyio
async def test_a_stream_without_usage_gets_counted_usage(fake: FakeProvider) -> None:
    events, error = await run(client(fake), "count me [[fault:no_usage]]")
    assert error is None and isinstance(events[-1], Finish)
    assert events[-1].usage.input_tokens > 0 and events[-1].usage.output_tokens > 0


@pytest.mark.anyio
async def test_stall_before_first_byte_is_a_timeout_without_sdk_retries(fake: FakeProvider) -> None:
    events, error = await run(client(fake, first_token_s=1.0), "[[fault:stall_first=4]]")
    assert error is not None and (error.kind, error.status) == ("timeout", 504)
    assert "DEV_SERVER_MODEL_FIRST_TOKEN_TIMEOUT_S" in error.message and events == []
    assert fake.requests == 1  # the SDK's own retries are off; timeouts are not retried by us


@pytest.mark.anyio
async def test_stall_mid_stream_hits_the_total_deadline(fake: FakeProvider) -> None:
    events, error = await run(client(fake, total_s=1.5), "[[fault:stall_mid=4]]")
    assert error is not None and error.kind == "timeout" and "DEV_SERVER_MODEL_TOTAL_TIMEOUT_S" in error.message
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hello", " from"]


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "words"), [("malformed", "not JSON"), ("wrong_shape", "unexpected shape"),
                                              ("inband_error", INBAND_MESSAGE)])
async def test_bad_chunks_are_response_errors_with_the_providers_words(fake: FakeProvider, mode: str,
                                                                       words: str) -> None:
    events, error = await run(client(fake, retries=2), f"[[fault:{mode}]]")
    assert error is not None and (error.kind, error.status) == ("response", 502), error
    assert words in error.message and "Could not reach" not in error.message
    assert fake.requests == 1  # text was already streamed: never retried


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["empty", "plain_json"])
async def test_no_content_is_a_response_error_not_an_empty_reply(fake: FakeProvider, mode: str) -> None:
    events, error = await run(client(fake), f"[[fault:{mode}]]")
    assert error is not None and error.kind == "response" and "no content" in error.message
    assert not any(isinstance(e, Finish) for e in events)


@pytest.mark.anyio
@pytest.mark.parametrize(("status", "kind"), [(401, "auth"), (429, "rate_limit"), (500, "provider")])
async def test_status_errors_keep_their_kind(fake: FakeProvider, status: int, kind: str) -> None:
    events, error = await run(client(fake), f"[[fault:status={status}]]")
    assert error is not None and error.kind == kind and events == []
    assert fake.requests == 1


@pytest.mark.anyio
@pytest.mark.parametrize(("retries", "status", "attempts"), [(2, 500, 3), (1, 429, 2), (3, 401, 1)])
async def test_retries_happen_only_as_the_settings_say(fake: FakeProvider, retries: int, status: int,
                                                       attempts: int) -> None:
    _, error = await run(client(fake, retries=retries), f"[[fault:status={status}]]")
    assert error is not None and fake.requests == attempts


# -- through the gateway ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway(fake: FakeProvider, module_servers: Servers) -> ProcessServer:
    """One gateway for the module, warmed up (``models.ready``) so the first-token deadline
    measures the provider and not this process's first-call setup; 2.5 s, well under the
    stalling fault's 5 s and well over a healthy first call on a loaded machine."""
    return module_servers.gateway(models_ready=True, env={
        "OPENAI_API_KEY": DUMMY_KEY, "OPENAI_BASE_URL": fake.base_url, "DEV_SERVER_TELEMETRY": "false",
        "DEV_SERVER_MODEL_FIRST_TOKEN_TIMEOUT_S": "2.5", "DEV_SERVER_MODEL_TOTAL_TIMEOUT_S": "4",
        "DEV_SERVER_MODEL_RETRIES": "0"})


def chat(gateway: Any, thread: str, text: str) -> httpx.Response:
    body = {"conversationId": thread, "messages": [user_message(f"u-{thread}", text)]}
    return local_http.post(f"{gateway.url}/api/chat", json=body, timeout=30)


def stored_roles(gateway: Any, thread: str) -> list[str]:
    rows = sqlite_rows(gateway.data_dir / "dev-server.db", "SELECT role FROM messages WHERE thread_id = ? "
                       "ORDER BY seq", (thread,))
    return [r[0] for r in rows]


def test_gateway_answers_from_the_provider(gateway: Any) -> None:
    response = chat(gateway, "t-ok", "hello")
    assert response.status_code == 200 and REPLY.split()[-1] in response.text
    assert stored_roles(gateway, "t-ok") == ["user", "assistant"]


@pytest.mark.parametrize("mode", ["empty", "plain_json"])
def test_gateway_reports_an_empty_stream_and_stores_no_reply(gateway: Any, mode: str) -> None:
    response = chat(gateway, f"t-{mode}", f"[[fault:{mode}]]")
    assert response.status_code == 502 and response.json()["kind"] == "response"
    assert stored_roles(gateway, f"t-{mode}") == ["user"]


def test_gateway_first_token_deadline_is_a_504_timeout(gateway: Any, fake: FakeProvider) -> None:
    response = chat(gateway, "t-stall", "[[fault:stall_first=5]]")
    assert response.status_code == 504 and response.json()["kind"] == "timeout"
    # asked once, not retried (a title request of an earlier test's thread may come at any time)
    assert sum("stall_first" in json.dumps(body) for body in fake.turn_bodies()) == 1


def test_gateway_in_band_error_mid_stream_is_an_error_chunk(gateway: Any) -> None:
    response = chat(gateway, "t-inband", "[[fault:inband_error]]")
    assert response.status_code == 200
    errors = [line for line in response.text.splitlines() if '"type":"error"' in line.replace(" ", "")]
    assert errors and INBAND_MESSAGE in errors[0] and "Could not reach" not in errors[0]
    assert response.text.rstrip().endswith("[DONE]")


def test_studio_generate_of_an_empty_stream_is_an_error_not_an_empty_stop(fake: FakeProvider, start_server: Any,
                                                                          data_dir: Any) -> None:
    studio = start_server("studio", env={"OPENAI_API_KEY": DUMMY_KEY, "OPENAI_BASE_URL": fake.base_url,
                                         "DEV_SERVER_TELEMETRY": "false", "DEV_SERVER_MODEL_RETRIES": "0"})
    wait_models_ready(studio)
    body = {"messages": "[[fault:plain_json]]", "memory": {"thread": "t-generate", "resource": "ai-chat"}}
    response = local_http.post(f"{studio.url}/api/agents/chat-agent/generate", json=body, timeout=30)
    assert response.status_code == 502 and response.json()["kind"] == "response", response.text
    rows = sqlite_rows(data_dir / "dev-server.db", "SELECT role FROM messages WHERE thread_id = 't-generate'")
    assert rows == [("user",)]
