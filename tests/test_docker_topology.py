"""The compose topology run as plain processes (issue 15.4): a real sqld, the studio, two
gateways and Debian's nginx with ``deploy/nginx.conf`` itself (service names mapped to
loopback ports, each process with its compose environment). A chat streams through the
balancer frame by frame, both gateways answer, a reply started on one gateway resumes
through the balancer, and every gateway's spans reach the studio over OTLP. The static
checks of the same files are in ``tests/test_docker_setup.py``."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from dev_server.settings import ENV_PREFIX
from tests.fake_provider import FakeProvider
from tests.kit.compose import (
    HEALTHCHECK,
    NGINX,
    app_services,
    environment,
    load_compose,
    nginx_command,
    render_nginx,
    role_of,
)
from tests.kit.local_http import local_http
from tests.sqld import Sqld
from tests.support import ServerProcess, free_port, run_node, user_message

pytestmark = pytest.mark.e2e

def process_env(service: dict[str, Any], base: dict[str, str], mapping: dict[str, str]) -> dict[str, str]:
    """A compose service's environment for a local process: container addresses mapped to
    loopback ones, container paths to temporary ones."""
    env = {**base, **environment(service)}
    for key, value in list(env.items()):
        if key in mapping:
            env[key] = mapping[key]
        elif key.startswith(ENV_PREFIX) or key.startswith("OTEL_"):
            assert "://" not in value, f"{key}={value} is not mapped to a local address"
    return {k: v for k, v in env.items() if v is not None}


def wait_for_port(port: int, process: subprocess.Popen, log: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}:\n{log.read_text()}")


def probe(role: str | None, ports: dict[str, int]) -> subprocess.CompletedProcess:
    env = {"DEV_SERVER_GATEWAY_PORT": str(ports.get("gateway", free_port())),
           "DEV_SERVER_STUDIO_PORT": str(ports.get("studio", free_port()))}
    return subprocess.run([sys.executable, "-I", str(HEALTHCHECK), *([role] if role else [])], env=env,
                          capture_output=True, text=True, timeout=30)


def wait_ok(role: str, port: int, server: ServerProcess, timeout: float = 90.0) -> None:
    """The image's own HEALTHCHECK probe decides when a process is ready."""
    deadline = time.monotonic() + timeout
    while (result := probe(role, {role: port})).returncode != 0:
        assert time.monotonic() < deadline, f"{role} not ok: {result.stderr}\n{server.output()}"
        assert server.process.poll() is None, server.output()
        time.sleep(0.3)


def chat(url: str, conversation: str, text: str) -> tuple[httpx.Response, list[tuple[float, str]]]:
    """One chat turn; each SSE data line with the time it arrived."""
    frames: list[tuple[float, str]] = []
    with local_http.stream("POST", f"{url}/api/chat", timeout=60, headers={"accept-encoding": "gzip"},
                      json={"id": conversation, "conversationId": conversation,
                            "messages": [user_message(f"{conversation}-1", text)]}) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                frames.append((time.monotonic(), line.removeprefix("data: ")))
    return response, frames


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory):
    """The compose topology as plain processes: studio, gateway-1, gateway-2 and nginx with
    deploy/nginx.conf, each with its compose environment (one worker per gateway, to spare
    the machine's cores; a real sqld where the compose file has its service)."""
    if NGINX is None:
        pytest.skip("Debian's nginx is not installed (make nginx)")
    tmp = tmp_path_factory.mktemp("topology")
    compose = load_compose()
    apps = app_services(compose)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DEV_SERVER_", "OTEL_")) and
            not k.endswith("_API_KEY")}
    base["PYTHONUNBUFFERED"] = "1"
    ports = {name: free_port() for name in apps}
    data_dir = tmp / "data"
    started: list[ServerProcess] = []
    nginx = None
    with FakeProvider() as fake, Sqld(tmp / "sqld") as sqld:
        try:
            mapping = {"DEV_SERVER_HOST": "127.0.0.1", "DEV_SERVER_DATA_DIR": str(data_dir),
                       "DEV_SERVER_DB_URL": sqld.url,  # http://sqld:8080 in the compose file
                       "DEV_SERVER_STUDIO_URL": f"http://127.0.0.1:{ports['studio']}",
                       "DEV_SERVER_WORKERS": "1"}
            provider = {"OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": fake.base_url}
            order = ["studio", *sorted(n for n in apps if n != "studio")]  # depends_on: the studio first
            for name in order:
                env = process_env(apps[name], {**base, **provider}, mapping)
                server = ServerProcess(role_of(apps[name]), env=env, python=sys.executable, port=ports[name])
                started.append(server)
                server.start()
                if name == "studio":
                    wait_ok("studio", ports[name], server)
            for server in started[1:]:
                wait_ok("gateway", server.port, server)
            lb_port = free_port()
            conf = render_nginx(tmp, lb_port, {n: ports[n] for n in apps if n != "studio"})
            log = tmp / "nginx.out"
            with log.open("wb") as out:
                nginx = subprocess.Popen(nginx_command(conf, "-g", "daemon off;"), stdout=out,
                                         stderr=subprocess.STDOUT)
            wait_for_port(lb_port, nginx, log)
            yield {"lb": f"http://127.0.0.1:{lb_port}", "servers": {n: s for n, s in zip(order, started, strict=True)},
                   "ports": ports}
        finally:
            if nginx is not None:
                nginx.send_signal(signal.SIGTERM)
                try:
                    nginx.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    nginx.kill()
                    nginx.wait()
            for server in reversed(started):
                server.stop()


def test_the_balancer_spreads_requests_over_both_gateways(topology):
    pids = {topology["servers"][name].process.pid for name in ("gateway-1", "gateway-2")}
    seen = set()
    with httpx.Client(timeout=10) as client:  # one client connection: nginx still alternates
        for _ in range(6):
            health = client.get(f"{topology['lb']}/health").json()
            assert health["role"] == "gateway" and health["status"] == "ok"
            seen.add(health["worker"]["pid"])
    assert seen == pids


def test_a_chat_streams_through_the_balancer_frame_by_frame(topology):
    # The fake provider sends two chunks, pauses 3 s, then the rest: the first text must
    # reach the client well before the pause ends (a proxy that compresses or holds the
    # stream would deliver it with the last frames; 2 s of slack for a busy machine).
    response, frames = chat(topology["lb"], "via-lb", "[[fault:stall_mid=3]] hello")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "content-encoding" not in response.headers  # no gzip on an event stream
    deltas = [at for at, data in frames if data.startswith("{") and json.loads(data).get("type") == "text-delta"]
    assert deltas and frames[-1][1] == "[DONE]"
    assert frames[-1][0] - deltas[0] >= 1.0, f"the first text came {frames[-1][0] - deltas[0]:.2f} s before the end"

    # Written through whichever gateway answered, visible in the studio at once (one database).
    studio = topology["servers"]["studio"]
    messages = local_http.get(f"{studio.url}/api/memory/threads/via-lb/messages", params={"agentId": "chat-agent"},
                         timeout=10).json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]


def test_every_gateway_exports_its_spans_to_the_studio(topology):
    """The studio stays the only DuckDB writer; each gateway reaches it over OTLP."""
    for name in ("gateway-1", "gateway-2"):
        response, _ = chat(topology["servers"][name].url, f"otlp-{name}", "hello")
        assert response.status_code == 200
    studio = topology["servers"]["studio"]
    deadline = time.monotonic() + 45
    threads: set[str] = set()
    while time.monotonic() < deadline and not {"otlp-gateway-1", "otlp-gateway-2"} <= threads:
        body = {"page": {"limit": 100, "after": None}}
        traces = local_http.post(f"{studio.url}/api/observability/traces/query", json=body, timeout=10).json()["traces"]
        threads = {t["threadId"] for t in traces}
        time.sleep(0.25)
    assert {"otlp-gateway-1", "otlp-gateway-2"} <= threads
    for name in ("gateway-1", "gateway-2"):
        telemetry = local_http.get(f"{topology['servers'][name].url}/health", timeout=10).json()["telemetry"]
        assert telemetry["spans"]["dropped"] == 0


def test_the_image_health_probe_finds_either_role_without_being_told(topology):
    ports = topology["ports"]
    assert probe(None, {"gateway": ports["gateway-1"]}).returncode == 0
    assert probe(None, {"studio": ports["studio"]}).returncode == 0
    dead = probe("gateway", {})
    assert dead.returncode == 1 and dead.stderr.startswith("unhealthy: nothing answers")


def test_a_reply_resumes_through_the_balancer_whichever_gateway_answers(topology):
    # the reply is produced by one gateway; nginx sends the reconnect to either: both can replay it.
    # The fake provider pauses 3 s after two text chunks: the client hangs up in that pause.
    result = run_node("resume_chat.mjs", {"api": f"{topology['lb']}/api/chat", "chatId": "via-lb-resume",
                                          "text": "[[fault:stall_mid=3]] hello",
                                          "body": {"conversationId": "via-lb-resume"}, "abortAfterChunks": 5})
    assert result["error"] is None and result["status"] == "ready" and result["resumeStatus"] == 200, result
    assert [m["role"] for m in result["messages"]] == ["user", "assistant"]


def test_a_flood_from_one_address_is_refused_by_nginx_in_json(topology):
    # Last in the module: it spends this address's request budget (refilled within 2 s).
    # 16 at a time: one after another on a loaded machine, 120 requests could take longer than
    # the budget (a burst of 40, then 20 a second) takes to refill
    with httpx.Client(timeout=10, limits=httpx.Limits(max_connections=16)) as client, \
            concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda _: client.get(f"{topology['lb']}/health"), range(120)))
    statuses = [answer.status_code for answer in answers]
    assert 200 in statuses and 429 in statuses, statuses
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert refused.headers["content-type"] == "application/json" and refused.headers["retry-after"] == "1"
    assert refused.json() == {"error": "Too many requests from this address; retry shortly"}
    time.sleep(2.5)
    assert local_http.get(f"{topology['lb']}/health", timeout=10).status_code == 200
