"""Start-up time as a user meets it: spawn to the first answered chat (gateway) and to the
first answered API call and first answered agent turn (studio).

The first ``/health`` comes long before either: litellm still imports in the background
then (``/health`` says ``status: "starting"``), and a chat sent meanwhile waits for it. So
each start is timed to three points: the first ``/health`` of any status, the first
``status: "ok"``, and the first request a user would make, fully answered (the gateway's
``POST /api/chat`` read to ``[DONE]``; the studio's ``GET /api/agents`` and its
``POST /api/agents/chat-agent/generate``). Each request is sent as soon as the port
accepts, like an impatient user would.

Baseline, in the same run: a bare uvicorn + FastAPI app with one route, started the same
way. Reports the median of several starts and each point's ratio to the baseline.
Run: .venv/bin/python bench/startup.py [starts]   (default 2; under a minute on 2 idle cores)
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.support import free_port  # noqa: E402

BARE_APP = (
    "import sys, uvicorn; from fastapi import FastAPI; app = FastAPI()\n"
    "@app.get('/health')\ndef health(): return {'status': 'ok'}\n"
    "uvicorn.run(app, port=int(sys.argv[1]), log_level='warning')\n"
)
CHAT = {"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}]}
GENERATE = {"messages": [{"role": "user", "content": "hello"}]}


def until(check: Callable[[], bool], proc: subprocess.Popen, started: float) -> float:
    """Seconds from ``started`` until ``check()`` is true (connection errors retried)."""
    while True:
        try:
            if check():
                return time.perf_counter() - started
        except httpx.TransportError:
            time.sleep(0.005)
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited early")


def chat_answered(base: str) -> bool:
    with httpx.stream("POST", f"{base}/api/chat", json=CHAT, timeout=120) as response:
        return response.status_code == 200 and "[DONE]" in response.read().decode()


def generate_answered(base: str) -> bool:
    response = httpx.post(f"{base}/api/agents/chat-agent/generate", json=GENERATE, timeout=120)
    return response.status_code == 200 and bool(response.json().get("text"))


def time_start(command: list[str], port: int, env: dict[str, str], role: str) -> dict[str, float]:
    base = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    proc = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    points: dict[str, float] = {}
    try:
        points["first /health"] = until(lambda: httpx.get(f"{base}/health", timeout=0.5).status_code == 200,
                                        proc, started)
        if role == "gateway":
            points["first chat answered"] = until(lambda: chat_answered(base), proc, started)
        elif role == "studio":
            points["first API call answered"] = until(
                lambda: httpx.get(f"{base}/api/agents", timeout=5).status_code == 200, proc, started)
            points["first agent turn answered"] = until(lambda: generate_answered(base), proc, started)
        points['/health "ok"'] = until(
            lambda: httpx.get(f"{base}/health", timeout=0.5).json().get("status") == "ok", proc, started)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=15)
    return points


def main() -> None:
    starts = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    results: dict[str, dict[str, list[float]]] = {"bare uvicorn app": {}, "gateway": {}, "studio": {}}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "DEV_SERVER_DATA_DIR": tmp, "DEV_SERVER_TELEMETRY": "false"}
        for _ in range(starts):
            port = free_port()
            for name, value in time_start([sys.executable, "-c", BARE_APP, str(port)], port, env, "bare").items():
                results["bare uvicorn app"].setdefault(name, []).append(value)
            for role in ("gateway", "studio"):
                port = free_port()
                points = time_start([sys.executable, "-m", "dev_server", role, "--port", str(port)], port, env, role)
                for name, value in points.items():
                    results[role].setdefault(name, []).append(value)
    baseline = statistics.median(results["bare uvicorn app"]["first /health"])
    print(f"{starts} starts each; baseline = bare uvicorn app's first /health, median {baseline * 1000:.0f} ms")
    for process, points in results.items():
        for name, values in points.items():
            median = statistics.median(values)
            print(f"{process:<17} {name:<26}: median {median * 1000:6.0f} ms, max {max(values) * 1000:6.0f} ms;"
                  f" ratio to baseline {median / baseline:5.1f}")


if __name__ == "__main__":
    main()
