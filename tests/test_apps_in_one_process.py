"""Apps in one process keep apart and leave nothing behind when they stop.

In production each process holds one app; the tests run many in one process, side by side
(a gateway and a studio on one data dir) and one after another. Whatever they share through
the process (loggers, litellm's client cache) must not carry one app's data into another,
nor keep what a stopped app opened.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest

from tests.fake_provider import REPLY, FakeProvider
from tests.kit.local_http import local_http
from tests.kit.servers import serving
from tests.support import user_message


def test_each_apps_log_records_are_exported_by_its_own_telemetry_only(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """Both apps' telemetry listens on the one ``dev_server`` logger: a record is exported by the
    telemetry of the app that logged it, and by that one only."""
    caplog.set_level(logging.INFO, logger="dev_server")  # "agent run started" is logged at INFO
    with (serving("studio", tmp_path) as studio,
          serving("gateway", tmp_path, {"DEV_SERVER_STUDIO_URL": studio.url}) as gateway):
        body = {"conversationId": "from-gateway", "messages": [user_message("g1", "hello")]}
        assert local_http.post(f"{gateway.url}/api/chat", json=body, timeout=30).status_code == 200
        run = {"messages": "hello", "memory": {"thread": "from-studio", "resource": "ai-chat"}}
        assert local_http.post(f"{studio.url}/api/agents/chat-agent/generate", json=run, timeout=30).status_code == 200
    # the gateway has stopped: what it queued has been sent to the studio
    # the studio has stopped: what it queued itself has been written
    with serving("studio", tmp_path) as studio:
        logs = local_http.get(f"{studio.url}/api/observability/logs",
                              params={"perPage": 100}, timeout=30).json()["logs"]
    started = sorted((log["threadId"], log["serviceName"]) for log in logs
                     if log["message"].startswith("agent run started: chat-agent on thread "))
    assert started == [("from-gateway", "dev-server-gateway"), ("from-studio", "dev-server-studio")], started


def test_a_stopped_app_leaves_no_provider_connection_open(data_dir: Path) -> None:
    """litellm caches its provider clients per event loop, process-wide: the app closes its
    loop's at shutdown, or their sockets are still open when the loop closes (reported then)."""
    with FakeProvider() as fake, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        env = {"OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": fake.base_url, "DEV_SERVER_TELEMETRY": "false"}
        with serving("gateway", data_dir, env) as gateway:
            body = {"conversationId": "t1", "messages": [user_message("u1", "hello")]}
            response = local_http.post(f"{gateway.url}/api/chat", json=body, timeout=30)
            assert response.status_code == 200 and REPLY.split()[-1] in response.text
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
