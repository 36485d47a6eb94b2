"""``make bench MASTRA=1`` (bench/mastra_server.py): the real Mastra server the benchmark
compares us with starts from npm's packages and answers issue 31's two requests, a thread
creation (and its refusal of a body without ``resourceId``) and a stream, as Mastra does,
with chat-agent's Observational Memory off and on. Only that it serves is checked, never its
times. ``e2e``: it needs npm's packages (``npm ci`` in bench/mastra at the first run) and
Node 22 from them."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest

from bench import mastra_server
from bench.load_requests import refuse_threads
from tests.support import free_port

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("om", [False, True], ids=["om-off", "om-on"])
def test_the_mastra_server_creates_a_thread_and_streams_a_remembered_turn(tmp_path: Path, om: bool):
    server = mastra_server.start(tmp_path, free_port(), om=om, log_dir=tmp_path)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            created = http.post("/api/memory/threads?agentId=chat-agent", json={"resourceId": "smoke", "title": "t 1"})
            assert created.status_code == 200 and created.headers["content-type"] == "application/json"
            assert created.json()["resourceId"] == "smoke" and created.json()["title"] == "t 1"

            refused = http.post("/api/memory/threads?agentId=chat-agent", json={})
            assert refused.status_code == 400  # the bench's request without storage (refuse_threads)

            thread = str(uuid.uuid4())
            streamed = http.post(mastra_server.AGENT_STREAM, json={
                "messages": [{"role": "user", "content": "hello"}], "memory": {"thread": thread, "resource": "smoke"}})
            assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
            frames = [line.removeprefix("data: ") for line in streamed.text.splitlines() if line.startswith("data: ")]
            assert frames[-1] == "[DONE]"
            chunks = [json.loads(frame) for frame in frames[:-1]]
            assert chunks[0]["type"] == "start" and chunks[-1]["type"] == "finish"
            text = "".join(c["payload"]["text"] for c in chunks if c["type"] == "text-delta")
            assert text == 'You said: "hello". I can see 0 earlier messages in this conversation.'

            stored = http.get(f"/api/memory/threads/{thread}/messages", params={"agentId": "chat-agent"})
            assert stored.status_code == 200
            assert [m["role"] for m in stored.json()["messages"]] == ["user", "assistant"]
        assert refuse_threads(server.url, 20, 4) > 0  # the load generator checks each answer is that 400
    finally:
        server.stop()
    assert server.proc.returncode is not None
