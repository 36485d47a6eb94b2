"""The turn rate limit (``DEV_SERVER_TURN_RATE_LIMIT``, ``dev_server.api.turn_limit``).

Past the limit a turn is a 429 JSON error with ``Retry-After`` and nothing is stored; the
caller is the principal with auth on, else the client address. The counters live in the
database, so one budget holds across the gateway's workers and the studio. The real ``ai``
package's transport (what useChat uses) and the real ``@mastra/client-js`` see the 429 as
an ordinary HTTP error.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from dev_server.kernel.clock import ManualClock
from dev_server.storage.rate_windows import RateWindows
from tests.kit.local_http import local_http
from tests.kit.servers import serving
from tests.support import pinned_clients, run_node, sqlite_rows, user_message

LONG_WINDOW = "3600"  # the windows never end during a test


def chat(client: httpx.Client | None, url: str, conversation: str, message_id: str, *,
         headers: dict[str, str] | None = None, path: str = "/api/chat") -> httpx.Response:
    body = {"conversationId": conversation, "messages": [user_message(message_id, "hello")]}
    response = (client or httpx).post(f"{url}{path}", json=body, headers=headers or {}, timeout=60)
    response.read()
    return response


def assert_limited(response: httpx.Response, limit: int) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"] == "application/json"
    retry = int(response.headers["retry-after"])
    assert 1 <= retry <= int(LONG_WINDOW)
    assert response.json() == {"error": f"Too many turns: at most {limit} every {LONG_WINDOW} s; retry in {retry} s"}


# -- the counter --------------------------------------------------------------------------

def at_ms(epoch_ms: int) -> ManualClock:
    return ManualClock(datetime.fromtimestamp(epoch_ms / 1000, UTC))


@pytest.mark.anyio
async def test_a_window_counts_hits_per_key_and_the_next_one_starts_again(libsql) -> None:
    clock = at_ms(5_000_000)
    windows = RateWindows(libsql, clock=clock)
    assert [(await windows.hit("a", 2, 1000)).allowed for _ in range(3)] == [True, True, False]
    assert (await windows.hit("b", 2, 1000)).allowed  # keys are counted apart
    # Another process (its own counter object) counts in the same rows.
    assert not (await RateWindows(libsql, clock=clock).hit("b", 1, 1000)).allowed
    clock.advance(milliseconds=999)
    refused = await windows.hit("a", 2, 1000)
    assert not refused.allowed and refused.count == 4 and refused.window_end_ms == 5_001_000
    clock.advance(milliseconds=1)  # a's window has ended: the next hit opens a new one
    fresh = await windows.hit("a", 2, 1000)
    assert fresh.allowed and fresh.count == 1 and fresh.window_end_ms == 5_002_000


@pytest.mark.anyio
async def test_rows_of_ended_windows_are_swept(libsql) -> None:
    clock = at_ms(5_000_000)
    windows = RateWindows(libsql, clock=clock)
    for key in ("a", "b", "c"):
        await windows.hit(key, 5, 1000)
    clock.advance(milliseconds=5000)
    await windows.hit("d", 5, 1000)
    assert [tuple(row) for row in await libsql.fetch_all("SELECT key FROM rate_windows")] == [("d",)]


# -- over HTTP ----------------------------------------------------------------------------
# The gateway's own process where its workers or its proxy trust (set by python -m dev_server on
# uvicorn, not by the app) are the subject; else a gateway in this process.

def test_turns_past_the_limit_are_429_per_client_address(start_server, data_dir: Path):
    gateway = start_server("gateway", env={"DEV_SERVER_TURN_RATE_LIMIT": "2",
                                           "DEV_SERVER_TURN_RATE_WINDOW_S": LONG_WINDOW})
    assert chat(None, gateway.url, "limited", "m1").status_code == 200
    assert chat(None, gateway.url, "limited", "m2", path="/api/agents/chat-agent/chat").status_code == 200
    assert_limited(chat(None, gateway.url, "limited", "m3"), 2)
    stored = sqlite_rows(data_dir / "dev-server.db", "SELECT id FROM messages WHERE role = 'user' ORDER BY id")
    assert stored == [("m1",), ("m2",)]  # the refused turn stored nothing

    # Another address (a proxy on loopback, trusted by default, names it) has its own budget.
    other = chat(None, gateway.url, "other", "o1", headers={"X-Forwarded-For": "203.0.113.7"})
    assert other.status_code == 200

    # useChat's transport (the real `ai` package) sees an HTTP error carrying our message.
    result = run_node("chat_client.mjs", {"api": f"{gateway.url}/api/chat", "chatId": "limited",
                                          "messages": [user_message("m4", "hello")],
                                          "body": {"conversationId": "limited"}})
    assert result["ok"] is False and result["status"] == 429
    assert "Too many turns: at most 2 every 3600 s" in result["error"]
    assert result["headers"]["retry-after"]
    assert result["chunks"] == []


def test_one_budget_per_principal_across_gateway_workers_and_the_studio(start_server):
    env = {"DEV_SERVER_AUTH_TOKENS": "tok-alice=alice,tok-bob=bob", "DEV_SERVER_TURN_RATE_LIMIT": "2",
           "DEV_SERVER_TURN_RATE_WINDOW_S": LONG_WINDOW}
    gateway = start_server("gateway", env={**env, "DEV_SERVER_WORKERS": "2"}, wait=False)
    studio = start_server("studio", env=env, wait=False)
    for server in (gateway, studio):
        server.wait_healthy(timeout=60)
    alice, bob = {"Authorization": "Bearer tok-alice"}, {"Authorization": "Bearer tok-bob"}
    workers = pinned_clients(gateway.url, 2, distinct=True)  # one connection on each worker
    try:
        assert chat(workers[0], gateway.url, "a-1", "a1", headers=alice).status_code == 200
        assert chat(workers[1], gateway.url, "a-2", "a2", headers=alice).status_code == 200
        assert_limited(chat(workers[0], gateway.url, "a-3", "a3", headers=alice), 2)
        assert_limited(chat(workers[1], gateway.url, "a-3", "a3", headers=alice), 2)

        # The studio's turns draw on the same budget: alice is refused on every run route.
        run = {"messages": [{"role": "user", "content": "hello"}]}
        for route in ("generate", "stream", "stream-until-idle"):
            assert_limited(local_http.post(f"{studio.url}/api/agents/chat-agent/{route}", json=run, headers=alice,
                                      timeout=60), 2)
        signal = {"threadId": "a-signal", "message": "hello"}
        assert_limited(local_http.post(f"{studio.url}/api/agents/chat-agent/send-message", json=signal, headers=alice,
                                  timeout=60), 2)

        # The real @mastra/client-js rejects the run with the 429 and our body (it retries
        # only 5xx and network errors, so one refused request is all it sends).
        for method in ("generate", "stream"):
            refused = run_node("studio_run.mjs", {"baseUrl": studio.url, "agentId": "chat-agent", "method": method,
                                                  "headers": alice})
            assert refused["ok"] is False and refused["errorName"] == "MastraClientError", refused
            assert refused["status"] == 429 and refused["body"]["error"].startswith("Too many turns: at most 2")

        # bob is another principal: his budget is untouched.
        generated = run_node("studio_run.mjs", {"baseUrl": studio.url, "agentId": "chat-agent", "method": "generate",
                                                "headers": bob})
        assert generated["ok"] is True and generated["text"].startswith("[local model]"), generated
        assert chat(workers[1], gateway.url, "b-1", "b1", headers=bob).status_code == 200
        assert_limited(chat(workers[0], gateway.url, "b-2", "b2", headers=bob), 2)
    finally:
        for client in workers:
            client.close()


def test_without_the_setting_turns_are_not_limited(data_dir: Path):
    with serving("gateway", data_dir) as gateway:
        assert [chat(None, gateway.url, "free", f"f{i}").status_code for i in range(4)] == [200] * 4
