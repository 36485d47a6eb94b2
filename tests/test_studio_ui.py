"""The real Mastra Studio served by the studio process (dev_server/api/studio/ui.py).

Fast tests run the router in a small app over a fake build (placeholders, one hashed asset)
and over a real uvicorn socket for the path-traversal cases, which must reach the server
byte for byte. The end-to-end test drives the real Studio 1.31 build (``make studio-ui``)
in Debian's headless chromium (tests/js/studio_ui.mjs) against real gateway and studio
processes sharing one data directory: a conversation written through the gateway is
opened in the Studio, a message is sent from the Studio, and no /api request, console
error or page error may fail. Another walks every page of the Studio's navigation
(tests/js/studio_pages.mjs) on a studio that has run a turn, under the same rule.
"""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from dev_server.api.studio.ui import studio_ui_router
from dev_server.errors import install_error_handlers
from tests.kit.local_http import local_http
from tests.kit.studio_ui import (
    CHROMIUM,
    HIDDEN_PAGES,
    chat_through_gateway,
    ensure_studio_build,
    run_studio,
    walk_studio,
)
from tests.support import LiveApp

pytestmark = pytest.mark.e2e

FAKE_INDEX = """<!doctype html><html><head><base href="%%MASTRA_STUDIO_BASE_PATH%%/" />
<script>
window.MASTRA_SERVER_HOST = '%%MASTRA_SERVER_HOST%%';
window.MASTRA_SERVER_PORT = '%%MASTRA_SERVER_PORT%%';
window.MASTRA_SERVER_PROTOCOL = '%%MASTRA_SERVER_PROTOCOL%%';
window.MASTRA_API_PREFIX = '%%MASTRA_API_PREFIX%%';
window.MASTRA_AGENT_SIGNALS = '%%MASTRA_AGENT_SIGNALS%%';
window.MASTRA_TELEMETRY_DISABLED = '%%MASTRA_TELEMETRY_DISABLED%%';
window.MASTRA_TEMPLATES = '%%MASTRA_TEMPLATES%%';
</script><script type="module" src="./assets/main-AbCd12_-.js"></script></head><body></body></html>
"""


@pytest.fixture
def fake_ui(tmp_path: Path) -> Path:
    ui = tmp_path / "studio-ui"
    (ui / "assets").mkdir(parents=True)
    (ui / "index.html").write_text(FAKE_INDEX)
    (ui / "assets" / "main-AbCd12_-.js").write_text("export const x = 1;\n")
    (ui / "assets" / "style-B8hWA7ar.css").write_text("body{}\n")
    (ui / "mastra-dark-tile.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    (ui / "VERSION").write_text("mastra@test\n")
    (ui / ".hidden").write_text("secret")
    (tmp_path / "outside.txt").write_text("outside")
    return ui


def ui_app(ui_dir: Path | None, **kwargs) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/api/agents")
    async def agents() -> dict:
        return {"chat-agent": {"name": "Chat Agent"}}

    app.include_router(studio_ui_router(ui_dir, **kwargs))
    return app


def window_vars(html: str) -> dict[str, str]:
    values = {}
    for line in html.splitlines():
        line = line.strip()
        if line.startswith("window.MASTRA_"):
            name, _, value = line.removeprefix("window.").partition(" = ")
            values[name] = value.rstrip(";").strip("'")
    return values


def test_index_fills_placeholders_from_the_request_host(fake_ui: Path):
    client = TestClient(ui_app(fake_ui), base_url="http://127.0.0.1:4999")
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["cache-control"] == "no-cache"
    assert "%%" not in response.text
    assert '<base href="/" />' in response.text
    assert window_vars(response.text) == {
        "MASTRA_SERVER_HOST": "127.0.0.1", "MASTRA_SERVER_PORT": "4999", "MASTRA_SERVER_PROTOCOL": "http",
        "MASTRA_API_PREFIX": "/api", "MASTRA_AGENT_SIGNALS": "false", "MASTRA_TELEMETRY_DISABLED": "true",
        "MASTRA_TEMPLATES": ""}
    other = client.get("/", headers={"host": "localhost:8123"})
    assert window_vars(other.text)["MASTRA_SERVER_HOST"] == "localhost"
    assert window_vars(other.text)["MASTRA_SERVER_PORT"] == "8123"
    ipv6 = client.get("/", headers={"host": "[::1]:4111"})
    assert window_vars(ipv6.text)["MASTRA_SERVER_HOST"] == "[::1]"
    default_port = TestClient(ui_app(fake_ui), base_url="https://studio.example").get("/")
    assert window_vars(default_port.text).items() >= {"MASTRA_SERVER_PORT": "443",
                                                      "MASTRA_SERVER_PROTOCOL": "https"}.items()
    signals = TestClient(ui_app(fake_ui, agent_signals=True)).get("/")
    assert window_vars(signals.text)["MASTRA_AGENT_SIGNALS"] == "true"


@pytest.mark.parametrize("host", ["evil';alert(1)//", "a b", "x:99999", "<script>", "h:1:2"])
def test_a_host_header_that_could_break_out_of_the_js_string_is_refused(fake_ui: Path, host: str):
    response = TestClient(ui_app(fake_ui)).get("/", headers={"host": host})
    assert response.status_code == 400
    assert response.json() == {"error": "Invalid Host header"}


def test_index_is_read_once_and_cached(fake_ui: Path):
    client = TestClient(ui_app(fake_ui))
    first = client.get("/agents").text
    (fake_ui / "index.html").write_text("changed")
    assert client.get("/agents").text == first


def test_spa_fallback_serves_index_for_deep_links_but_not_for_api_or_assets(fake_ui: Path):
    client = TestClient(ui_app(fake_ui))
    index = client.get("/").text
    for path in ("/agents", "/agents/chat-agent/threads/5b7c", "/agents/chat-agent/chat/x?y=1", "/traces/abc",
                 "/api-docs", "/%2e%2e%2fsecret"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response.text == index, path
    assert client.get("/api/agents").json() == {"chat-agent": {"name": "Chat Agent"}}
    for path in ("/api", "/api/", "/api/nope", "/api/memory/threads/abc", "/api/assets/main-AbCd12_-.js"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert response.json() == {"error": "Not found"}, path
    missing = client.get("/assets/main-OldHash1.js")
    assert missing.status_code == 404 and missing.json() == {"error": "Not found"}
    assert client.post("/agents").status_code in (404, 405)


def test_assets_have_their_content_type_and_hashed_ones_are_immutable(fake_ui: Path):
    client = TestClient(ui_app(fake_ui))
    js = client.get("/assets/main-AbCd12_-.js")
    assert js.status_code == 200 and js.text == "export const x = 1;\n"
    assert js.headers["content-type"] == "text/javascript; charset=utf-8"
    assert js.headers["cache-control"] == "public, max-age=31536000, immutable"
    css = client.get("/assets/style-B8hWA7ar.css")
    assert css.headers["content-type"] == "text/css; charset=utf-8"
    svg = client.get("/mastra-dark-tile.svg")
    assert svg.headers["content-type"] == "image/svg+xml"
    assert svg.headers["cache-control"] == "no-cache"
    deep = client.get("/agents/x/threads/assets/main-AbCd12_-.js")  # relative URL under a deep link
    assert deep.headers["content-type"].startswith("text/html")  # <base href="/"> prevents this in the browser
    head = client.head("/assets/main-AbCd12_-.js")
    assert head.status_code == 200 and head.content == b""
    assert client.get("/index.html").text == client.get("/").text  # never the raw template


def test_refresh_events_is_a_quiet_no_content(fake_ui: Path):
    response = TestClient(ui_app(fake_ui)).get("/refresh-events")
    assert response.status_code == 204 and response.content == b""


@pytest.mark.parametrize("ui_dir", [None, "missing"])
def test_without_a_build_root_explains_how_to_install_and_the_api_still_works(tmp_path: Path, ui_dir):
    client = TestClient(ui_app(None if ui_dir is None else tmp_path / ui_dir))
    for path in ("/", "/agents/chat-agent/threads/x"):
        response = client.get(path)
        assert response.status_code == 200
        assert "not installed" in response.text and "<pre>dev-server studio-ui</pre>" in response.text
    assert client.get("/api/agents").status_code == 200
    assert client.get("/api/nope").json() == {"error": "Not found"}
    assert client.get("/assets/main-AbCd12_-.js").status_code == 404


def raw_get(port: int, target: bytes) -> tuple[int, bytes]:
    """Send a request line exactly as given (no client-side dot-segment normalisation)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


TRAVERSALS = [
    b"/../../etc/passwd", b"/../outside.txt", b"/assets/../../outside.txt", b"/%2e%2e/outside.txt",
    b"/%2e%2e%2foutside.txt", b"/assets/%2e%2e/%2e%2e/outside.txt", b"/..%2f..%2fetc%2fpasswd",
    b"/%252e%252e/outside.txt", b"/assets/..%5c..%5coutside.txt", b"/.hidden", b"/%2ehidden",
    b"//etc/passwd", b"/assets//etc/passwd", b"/%00/etc/passwd", b"/assets/x%00.js", b"/VERSION/..",
    b"/.%2e/outside.txt", b"/assets/%2e%2e%2f%2e%2e%2foutside.txt",
]


def test_path_traversal_never_leaves_the_build_directory(fake_ui: Path):
    with LiveApp(ui_app(fake_ui)) as live:
        _, index = raw_get(live.port, b"/")
        for target in TRAVERSALS:
            status, body = raw_get(live.port, target)
            assert b"outside" not in body and b"root:" not in body and b"secret" not in body, target
            assert status in (200, 400, 404), target
            if status == 200:
                assert body == index, target


# --- end to end: real Studio build in chromium, real gateway + studio processes -----------


@pytest.fixture
def servers(start_server):
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed (apt-get install -y chromium)")
    ui_dir = ensure_studio_build()
    env = {"DEV_SERVER_STUDIO_UI_DIR": str(ui_dir), "DEV_SERVER_LOCAL_MODEL_ONLY": "true"}
    return start_server("gateway", env=env), start_server("studio", env=env)


# None: the transport index.html announces (the factory's agent_signals); False: POST /stream.
@pytest.mark.parametrize("agent_signals", [None, False], ids=["page-default", "stream"])
def test_studio_opens_a_gateway_thread_and_chats_in_chromium(servers, tmp_path: Path, agent_signals):
    gateway, studio = servers
    conversation = str(uuid.uuid4())
    stream = chat_through_gateway(gateway.url, conversation, "my name is Ada")
    assert "[DONE]" in stream or '"type":"finish"' in stream, stream[-500:]

    screenshot = tmp_path / "studio.png"
    request = {"threadId": conversation, "expectThreadText": "my name is Ada", "sendText": "what is my name?",
               "screenshotPath": str(screenshot)}
    if agent_signals is not None:
        request["agentSignals"] = agent_signals
    result = run_studio(studio, **request)
    assert result["finalUrl"].endswith(f"/agents/chat-agent/threads/{conversation}")
    assert "Ada" in result["replyText"]  # the reply saw the gateway's earlier turn
    assert os.path.getsize(screenshot) > 0


def test_a_tool_call_from_the_gateway_shows_as_a_tool_badge_in_the_studio(servers):
    gateway, studio = servers
    conversation = str(uuid.uuid4())
    stream = chat_through_gateway(gateway.url, conversation, "use the calculator tool: 1234 + 4321")
    assert '"type":"tool-output-available"' in stream, stream[-800:]
    # The Studio renders a stored tool-invocation part as a badge with the tool's title-cased
    # name; no text of the conversation is exactly "Calculator".
    result = run_studio(studio, threadId=conversation, expectThreadText="5555", expectThreadExactText="Calculator",
                        sendText="thanks")
    assert result["finalUrl"].endswith(f"/agents/chat-agent/threads/{conversation}")


def test_studio_new_chat_in_chromium_tolerates_only_the_new_thread_404(servers):
    _, studio = servers
    result = run_studio(studio, sendText="hello from the studio")
    assert "/agents/chat-agent/threads/" in result["finalUrl"]
    assert all("/api/memory/threads/" in url for url in result["expectedNewThread404s"])


def test_every_page_of_the_studios_navigation_loads_in_chromium(servers):
    """Issue 30: Datasets, Experiments, Review Queue, Evaluation, Prompts and Inbox failed
    to load (404s for /api/experiments and /api/stored/prompt-blocks). Every page now loads
    without a failed request or console error; the only 404 is the new chat's thread (as on
    Mastra). A run first, so Traces, Logs and Metrics have something to show."""
    _, studio = servers
    run = local_http.post(f"{studio.url}/api/agents/chat-agent/stream", timeout=60,
                     json={"messages": "hello", "memory": {"thread": "walk", "resource": "chat-agent"}})
    assert run.status_code == 200 and run.text.rstrip().endswith("data: [DONE]")
    sidebar = ("/inbox", "/agents", "/workflows", "/tools", "/evaluation", "/scorers", "/datasets", "/experiments",
               "/experiments/review-queue", "/metrics", "/traces", "/logs", "/settings")
    result = walk_studio(studio, expect_paths=sidebar)
    walked = [page["path"] for page in result["pages"]]
    assert {*sidebar, *HIDDEN_PAGES} <= set(walked)
    assert walked[-1] == "/agents/chat-agent/threads/new"
    for page in result["pages"]:
        assert page["failureTexts"] == [], page
    requested = {url.split("?")[0].removeprefix(studio.url) for url in (r["url"] for r in result["requests"])}
    assert {"/api/experiments", "/api/stored/prompt-blocks", "/api/datasets", "/api/system/packages"} <= requested
    assert all("/api/memory/threads/" in url for url in result["expectedNewThread404s"])

