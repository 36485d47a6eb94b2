"""What a user sees in the log: one access line per request (method, path, status,
milliseconds), and agent run lines that name the agent, the thread and the duration.
A real uvicorn in this process; the scripted model answers the turns."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path

import httpx
import pytest

from dev_server.factory import create_app
from dev_server.llm.scripted import Reply, ScriptedModel
from dev_server.settings import Settings
from tests.kit.local_http import local_http
from tests.support import LiveApp, user_message

LINE = re.compile(r"(?P<method>[A-Z]+) (?P<path>\S+) (?P<status>\d{3}|-) (?P<ms>\d+\.\d) ms(?P<left> \(client left\))?")
AUTH = {"authorization": "Bearer ta"}
RUNNER = "dev_server.agents.runner"


def chat_body(thread: str, text: str) -> dict:
    return {"conversationId": thread, "messages": [user_message(f"m-{thread}", text)]}


def lines_of(caplog: pytest.LogCaptureFixture, logger: str, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno >= level]


def test_one_access_line_per_request_and_run_lines_name_agent_thread_and_time(data_dir: Path,
                                                                              caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger=RUNNER)
    caplog.set_level(logging.DEBUG, logger="access")  # last: it sets the capture's level too
    slow = Reply(text=" ".join(f"word{i}" for i in range(15)), piece_delay_s=0.1)
    llm = ScriptedModel(["Hello there.", slow])
    app = create_app("gateway", Settings(data_dir=data_dir, telemetry=False, auth_tokens="ta=alice"), llm=llm)
    with LiveApp(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.get("/health").status_code == 200
        answered = client.post("/api/chat?debug=secret", json=chat_body("c1", "hi"), headers=AUTH)
        assert answered.status_code == 200 and answered.text.rstrip().endswith("data: [DONE]")
        assert client.post("/api/chat", json=chat_body("c1", "hi")).status_code == 401
        assert client.get("/no/such/page").status_code == 404
        with client.stream("POST", "/api/chat", json=chat_body("c2", "go on"), headers=AUTH) as streaming:
            for line in streaming.iter_lines():
                if '"text-delta"' in line:
                    break  # the client leaves mid-reply
        deadline = time.monotonic() + 20
        while not any("thread c2" in line and "finished" in line for line in lines_of(caplog, RUNNER)):
            assert time.monotonic() < deadline, lines_of(caplog, RUNNER)
            time.sleep(0.05)
        while len(lines_of(caplog, "access")) < 4:
            assert time.monotonic() < deadline, lines_of(caplog, "access")
            time.sleep(0.05)

    access = [LINE.fullmatch(line) for line in lines_of(caplog, "access")]
    assert all(access), lines_of(caplog, "access")
    seen = sorted((m["method"], m["path"], m["status"], bool(m["left"])) for m in access)  # in the order they ended
    assert seen == [("GET", "/no/such/page", "404", False),
                    ("POST", "/api/chat", "200", False),  # the path alone: no query string in the log
                    ("POST", "/api/chat", "200", True),
                    ("POST", "/api/chat", "401", False)]
    probes = [r.getMessage() for r in caplog.records if r.name == "access" and r.levelno == logging.DEBUG]
    assert len(probes) == 1 and probes[0].startswith("GET /health 200 ")  # a probe, quietly

    runs = lines_of(caplog, RUNNER)
    assert any(re.fullmatch(r"agent run started: chat-agent on thread c1, \d+ ms", line) for line in runs), runs
    assert any(re.fullmatch(r"agent run finished: chat-agent on thread c1, \d+ ms", line) for line in runs), runs
    # the client of c2 left, and its reply ran on to its end (stream resume, the default)
    assert any(re.fullmatch(r"agent run finished: chat-agent on thread c2, \d+ ms", line) for line in runs), runs


def test_a_failed_run_line_says_who_how_long_and_why(data_dir: Path, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger=RUNNER)
    llm = ScriptedModel([Reply(text="Half an answer", error="rate_limit")])
    app = create_app("gateway", Settings(data_dir=data_dir, telemetry=False), llm=llm)
    with LiveApp(app) as server:
        response = local_http.post(f"{server.url}/api/chat", json=chat_body("f1", "hi"), timeout=30)
    errors = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith('data: {"type":"error"')]
    assert errors, response.text
    failed = [r for r in caplog.records if r.getMessage().startswith("agent run failed")]
    assert len(failed) == 1 and failed[0].levelno == logging.WARNING
    assert re.fullmatch(r"agent run failed: chat-agent on thread f1, \d+ ms: .+", failed[0].getMessage())


def test_the_studios_routine_traffic_is_quiet_unless_it_fails(data_dir: Path, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG, logger="access")
    with LiveApp(create_app("studio", Settings(data_dir=data_dir, telemetry=False))) as server:
        assert local_http.get(f"{server.url}/api/agents", timeout=30).status_code == 200
        assert local_http.post(f"{server.url}/v1/traces", json={"resourceSpans": []}, timeout=30).status_code == 200
        bad = local_http.post(f"{server.url}/v1/traces", content=b"{nope", timeout=30,
                         headers={"content-type": "application/json"})
        assert bad.status_code == 400
    levels = {(m["method"], m["path"], m["status"]): r.levelno for r in caplog.records if r.name == "access"
              for m in [LINE.fullmatch(r.getMessage())]}
    assert levels == {("GET", "/api/agents", "200"): logging.INFO, ("POST", "/v1/traces", "200"): logging.DEBUG,
                      ("POST", "/v1/traces", "400"): logging.INFO}
