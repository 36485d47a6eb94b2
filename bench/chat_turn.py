"""Gateway overhead per chat turn, with the local model streaming instantly.

For a thread of 10 and of 10,000 stored messages, each turn POSTs one new user message
with a conversationId and reads the stream to ``[DONE]``: time to first byte and total.
Baseline, measured in the same run: a bare FastAPI endpoint (sse-starlette, no memory, no
model) that streams the bytes of a recorded real turn, frame by frame. Both servers are
uvicorn subprocesses on loopback, read by the same keep-alive client.
Run: .venv/bin/python bench/chat_turn.py [turns per scenario]
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dev_server.kernel.clock import now_iso  # noqa: E402
from dev_server.kernel.messages import Message  # noqa: E402
from dev_server.storage.conversations import ConversationStore  # noqa: E402
from dev_server.storage.libsql import LibSQLStore  # noqa: E402
from tests.support import free_port  # noqa: E402

BASELINE_APP = """
import json, sys, uvicorn
from fastapi import FastAPI, Request
from sse_starlette import EventSourceResponse
frames = json.load(open(sys.argv[2]))
app = FastAPI()

@app.post("/api/chat")
async def chat(request: Request):
    await request.body()
    async def stream():
        for data in frames:
            yield {"data": data}
    return EventSourceResponse(stream(), sep="\\n", headers={"x-vercel-ai-ui-message-stream": "v1"})

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


async def seed(db_path: Path, thread_id: str, count: int) -> None:
    await store_thread(db_path, thread_id, [
        Message(f"{thread_id}-seed-{i}", thread_id, "ai-chat", "user" if i % 2 == 0 else "assistant",
                {"format": 2, "parts": [{"type": "text", "text": f"message number {i}"}],
                 "content": f"message number {i}"}, now_iso()) for i in range(count)])


async def store_thread(db_path: Path, thread_id: str, messages: list[Message]) -> None:
    """``messages`` stored as the thread ``thread_id`` of ``ai-chat`` in the database file."""
    db = LibSQLStore(f"file:{db_path}")
    await db.open()
    store = ConversationStore(db)
    await store.ensure_thread(thread_id, "ai-chat")
    await store.append_messages(thread_id, messages)
    await db.close()


def start(command: list[str], port: int, env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).json()
            if health.get("models", {"ready": True})["ready"]:  # the baseline has no models
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{command} did not start")


def turn(client: httpx.Client, url: str, conversation: str, i: int) -> tuple[float, float, bytes]:
    body = {"id": "bench", "trigger": "submit-message", "conversationId": conversation,
            "messages": [{"id": f"{conversation}-turn-{i}", "role": "user",
                          "parts": [{"type": "text", "text": f"hello number {i}"}]}]}
    started = time.perf_counter()
    first = None
    data = b""
    with client.stream("POST", url, json=body) as response:
        for chunk in response.iter_raw():
            if first is None:
                first = time.perf_counter() - started
            data += chunk
    return first, time.perf_counter() - started, data


def measure(client: httpx.Client, url: str, conversation: str, turns: int) -> tuple[list[float], list[float]]:
    for i in range(5):  # warm-up: connection, litellm import, caches
        turn(client, url, conversation, -1 - i)
    ttfb, total = [], []
    for i in range(turns):
        first, whole, data = turn(client, url, conversation, i)
        assert data.rstrip().endswith(b"data: [DONE]"), data[-200:]
        ttfb.append(first)
        total.append(whole)
    return ttfb, total


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        data_dir = tmp_path / "data"
        data_dir.mkdir()
        for thread, count in (("small", 10), ("large", 10_000)):
            asyncio.run(seed(data_dir / "dev-server.db", thread, count))
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(DEV_SERVER_DATA_DIR=str(data_dir), DEV_SERVER_LOG_LEVEL="warning")
        gateway_port, baseline_port = free_port(), free_port()
        gateway = start([sys.executable, "-m", "dev_server", "gateway", "--port", str(gateway_port)], gateway_port, env)
        try:
            # TCP_NODELAY as browsers, curl and Node's fetch set it: without it, httpx's
            # separate header and body writes meet the server's delayed ACK (~40 ms a turn).
            nodelay = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
            with httpx.Client(timeout=60, transport=nodelay) as client:
                url = f"http://127.0.0.1:{gateway_port}/api/chat"
                _, _, recorded = turn(client, url, "recording", 0)
                frames = [line[6:].rstrip("\r") for line in recorded.decode().splitlines() if line.startswith("data: ")]
                (tmp_path / "frames.json").write_text(json.dumps(frames))
                baseline = start([sys.executable, "-c", BASELINE_APP, str(baseline_port),
                                  str(tmp_path / "frames.json")], baseline_port, env)
                try:
                    results = {"baseline (bare SSE)": measure(client, f"http://127.0.0.1:{baseline_port}/api/chat",
                                                              "b", turns)}
                    for thread, count in (("small", 10), ("large", 10_000)):
                        results[f"gateway, {count:>6} msgs"] = measure(client, url, thread, turns)
                finally:
                    baseline.send_signal(signal.SIGINT)
                    baseline.wait(10)
        finally:
            gateway.send_signal(signal.SIGINT)
            gateway.wait(10)

    base_ttfb, base_total = (statistics.median(v) for v in results["baseline (bare SSE)"])
    print(f"{turns} turns per scenario, {len(frames)} frames per reply")
    print(f"{'scenario':<22} {'ttfb p50':>9} {'ttfb p99':>9} {'total p50':>10} {'total p99':>10}"
          "  ratio(p50 ttfb, total)")
    for name, (ttfb, total) in results.items():
        print(f"{name:<22} {pct(ttfb, .5):8.2f}ms {pct(ttfb, .99):8.2f}ms"
              f" {pct(total, .5):9.2f}ms {pct(total, .99):9.2f}ms"
              f"  {statistics.median(ttfb) / base_ttfb:5.2f}x, {statistics.median(total) / base_total:5.2f}x")


if __name__ == "__main__":
    main()
