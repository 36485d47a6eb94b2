"""CORS on both processes, over real HTTP (dev_server/api/cors.py).

A page on this machine (localhost, 127.0.0.1, [::1], any port) may call either process with
credentials; any other origin gets no CORS header at all, so a browser lets it read nothing.
``DEV_SERVER_CORS_ORIGINS`` replaces the default. Preflights are answered before
authentication.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from dev_server.factory import create_app
from dev_server.settings import Settings
from tests.kit.studio_ui import CHROMIUM
from tests.support import LiveApp, run_node

# A path each process serves to a browser, and a body it accepts.
API = {"gateway": "/api/chat", "studio": "/api/agents"}
LOCAL = ["http://localhost:3000", "http://127.0.0.1:5173", "https://localhost", "http://[::1]:8080"]
FOREIGN = ["https://evil.example", "http://localhost.evil.example", "http://127.0.0.1.nip.io:3000",
           "null", "http://localhost:3000.evil.example"]


def preflight(client: httpx.Client, path: str, origin: str, method: str = "POST",
              headers: str = "content-type, x-mastra-client-type, x-user-added") -> httpx.Response:
    return client.options(path, headers={"Origin": origin, "Access-Control-Request-Method": method,
                                         "Access-Control-Request-Headers": headers})


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-")}


@pytest.fixture
def serve(data_dir: Path) -> Iterator:
    with ExitStack() as stack:

        def start(role: str, **settings: object) -> httpx.Client:
            server = stack.enter_context(LiveApp(create_app(role, Settings(data_dir=data_dir, **settings))))
            return stack.enter_context(httpx.Client(base_url=server.url, timeout=30))

        yield start


@pytest.mark.parametrize("role", ["gateway", "studio"])
def test_a_local_origin_gets_a_204_preflight_and_a_readable_answer(serve, role: str):
    client = serve(role)
    for origin in LOCAL:
        answer = preflight(client, API[role], origin)
        assert answer.status_code == 204 and answer.content == b"", origin
        assert answer.headers["access-control-allow-origin"] == origin
        assert answer.headers["access-control-allow-credentials"] == "true"
        assert answer.headers["access-control-allow-headers"] == "content-type, x-mastra-client-type, x-user-added"
        assert set(answer.headers["access-control-allow-methods"].split(", ")) == {
            "GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
    origin = LOCAL[0]
    if role == "gateway":
        real = client.post(API[role], headers={"Origin": origin},
                           json={"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]})
        assert real.headers["content-type"].startswith("text/event-stream")
        assert "x-vercel-ai-ui-message-stream" in real.headers["access-control-expose-headers"].lower()
    else:
        real = client.get(API[role], headers={"Origin": origin})
    assert real.status_code == 200
    assert real.headers["access-control-allow-origin"] == origin
    assert real.headers["access-control-allow-credentials"] == "true"
    assert "Origin" in real.headers["vary"]


@pytest.mark.parametrize("role", ["gateway", "studio"])
def test_a_foreign_origin_gets_no_cors_header_at_all(serve, role: str):
    client = serve(role)
    for origin in FOREIGN:
        answer = preflight(client, API[role], origin)
        assert answer.status_code == 403 and answer.json() == {"error": "Origin not allowed"}, origin
        assert cors_headers(answer) == {}, origin
        real = client.get("/health", headers={"Origin": origin})
        assert real.status_code == 200 and cors_headers(real) == {}, origin
        assert "Origin" in real.headers["vary"]
    deleted = client.delete("/api/memory/threads/t1", headers={"Origin": FOREIGN[0]})
    assert cors_headers(deleted) == {}


def test_configured_origins_replace_the_local_default(serve):
    client = serve("studio", cors_origins="https://app.example.com, http://studio.internal:3000/")
    for origin in ("https://app.example.com", "http://studio.internal:3000"):
        answer = preflight(client, "/api/agents", origin, "GET")
        assert answer.status_code == 204 and answer.headers["access-control-allow-origin"] == origin
        assert answer.headers["access-control-allow-credentials"] == "true"
    local = preflight(client, "/api/agents", "http://localhost:3000", "GET")
    assert local.status_code == 403 and cors_headers(local) == {}


def test_a_star_allows_any_origin_without_credentials(serve):
    client = serve("gateway", cors_origins="*")
    answer = preflight(client, "/api/chat", "https://anywhere.example")
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in answer.headers
    real = client.get("/health", headers={"Origin": "https://anywhere.example"})
    assert real.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in real.headers


@pytest.mark.parametrize("role", ["gateway", "studio"])
def test_preflights_never_reach_auth_and_refusals_are_readable(serve, role: str):
    client = serve(role, auth_tokens="ta=alice")
    origin = "http://localhost:3000"
    answer = preflight(client, API[role], origin, headers="authorization, content-type")
    assert answer.status_code == 204 and answer.headers["access-control-allow-origin"] == origin
    refused = client.post(API[role], headers={"Origin": origin}, json={})
    assert refused.status_code == 401 and refused.json()["error"] == "Authentication required"
    assert refused.headers["access-control-allow-origin"] == origin  # the page can tell why
    foreign = preflight(client, API[role], "https://evil.example")
    assert foreign.status_code == 403 and cors_headers(foreign) == {}


def test_a_method_we_do_not_serve_is_refused_in_json(serve):
    client = serve("studio")
    answer = preflight(client, "/api/agents", "http://localhost:3000", method="TRACE")
    assert answer.status_code == 400 and "method" in answer.json()["error"]


@pytest.mark.e2e
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (make browser)")
@pytest.mark.parametrize("role", ["gateway", "studio"])
def test_in_a_real_browser_only_local_pages_read_the_answer(serve, role: str):
    client = serve(role)
    request = {"gateway": {"method": "POST", "body": {"messages": [
                   {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}},
               "studio": {"method": "GET", "headers": {"x-mastra-client-type": "studio"}}}[role]
    result = run_node("cors_browser.mjs", {"target": f"{client.base_url}{API[role]}",
                                           "origins": ["local", "https://evil.example"], **request},
                      timeout=90)
    local, foreign = result["results"]
    assert (local["ok"], local["status"]) == (True, 200), local
    assert foreign["ok"] is False and "Failed to fetch" in foreign["error"], foreign
