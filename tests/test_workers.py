"""The gateway's workers (``DEV_SERVER_WORKERS``, dev_server/workers.py: uvicorn's supervisor):
real processes, real HTTP.

Requests on new connections land on either worker; SIGTERM to the supervisor stops them all
and exits 0; a worker that dies, or hangs, is replaced by a new one that serves; a
SIGKILLed supervisor's workers stop on their own. One worker is one process, and the
studio is always one.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from dev_server.settings import Settings, SettingsError
from tests.kit.local_http import local_http
from tests.support import pinned_clients, sqlite_rows, user_message

# Scale-out on one host: the e2e lane (make test runs it, make test-fast does not).
pytestmark = pytest.mark.e2e

TWO = {"DEV_SERVER_WORKERS": "2"}
# Each worker is a spawned process that imports the app (about 0.9 s of CPU): on a loaded
# machine two of them take a while to start (docs/architecture.md#decisions).
START_S = 90.0


def two_workers(start_server):
    gateway = start_server("gateway", env=TWO, wait=False)
    gateway.wait_healthy(timeout=START_S)
    return gateway


def worker_reports(url: str, want: int, timeout: float = START_S) -> dict[int, dict]:
    """``/health``'s ``worker`` by pid, over new connections (no keep-alive), until ``want``
    distinct pids answered."""
    seen: dict[int, dict] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < deadline:
        try:
            report = local_http.get(f"{url}/health", timeout=5).json()["worker"]
        except httpx.TransportError:  # the connection landed on a worker as it was killed
            continue
        seen[report["pid"]] = report
    return seen


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def wait_until(predicate, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def refused(url: str) -> bool:
    try:
        local_http.get(f"{url}/health", timeout=1)
    except httpx.TransportError:
        return True
    return False


def chat_on(client: httpx.Client, url: str, thread: str) -> None:
    body = {"conversationId": thread, "messages": [user_message(f"m-{thread}", "hello")]}
    response = client.post(f"{url}/api/chat", json=body)
    assert response.status_code == 200 and response.text.rstrip().endswith("data: [DONE]"), response.text


def test_two_workers_answer_and_sigterm_to_the_supervisor_stops_them_all(start_server):
    gateway = two_workers(start_server)
    reports = worker_reports(gateway.url, 2)
    assert len(reports) == 2, reports
    assert all(r == {"pid": pid, "count": 2, "supervisorPid": gateway.process.pid} for pid, r in reports.items())
    assert gateway.process.pid not in reports  # the supervisor serves nothing itself
    gateway.process.send_signal(signal.SIGTERM)
    assert gateway.process.wait(timeout=15) == 0
    assert all(gone(pid) for pid in reports)
    assert refused(gateway.url)
    output = gateway.output()
    assert "Received SIGTERM, exiting." in output and "Traceback" not in output


def test_a_killed_worker_is_replaced_by_one_that_serves(start_server, data_dir: Path):
    gateway = two_workers(start_server)
    first, second = worker_reports(gateway.url, 2)
    killed = time.monotonic()
    os.kill(first, signal.SIGKILL)
    assert wait_until(lambda: f"Child process [{first}] died" in gateway.output(), START_S), gateway.output()
    replaced = worker_reports(gateway.url, 2)  # both answer again: the survivor and the new one
    assert second in replaced and first not in replaced and len(replaced) == 2, replaced
    restart_s = time.monotonic() - killed
    new = next(pid for pid in replaced if pid != second)
    clients = pinned_clients(gateway.url, 2, distinct=True)
    try:
        pids = [c.get(f"{gateway.url}/health").json()["worker"]["pid"] for c in clients]
        assert sorted(pids) == sorted([second, new])
        for client, pid in zip(clients, pids, strict=True):
            chat_on(client, gateway.url, f"after-restart-{pid}")  # the new worker chats, and so does the other
    finally:
        for client in clients:
            client.close()
    assert len(sqlite_rows(data_dir / "dev-server.db", "SELECT id FROM messages")) == 4
    assert re.search(rf"gateway:{new} +\| INFO +uvicorn.error: Application startup complete", gateway.output())
    print(f"worker replaced and serving {restart_s:.2f} s after SIGKILL")  # the closing note's figure


@pytest.mark.slow
def test_a_hung_worker_is_replaced(start_server):
    """A worker that stops answering the supervisor's ping (here: SIGSTOP) for
    ``HEALTHCHECK_S`` is killed and replaced (a deliberate wait of that long)."""
    from dev_server.workers import HEALTHCHECK_S

    gateway = two_workers(start_server)
    hung, other = worker_reports(gateway.url, 2)
    os.kill(hung, signal.SIGSTOP)
    assert wait_until(lambda: f"Child process [{hung}] died" in gateway.output(), timeout=HEALTHCHECK_S * 3)
    assert gone(hung)
    replaced = worker_reports(gateway.url, 2)
    assert other in replaced and hung not in replaced and len(replaced) == 2, replaced


def test_the_workers_of_a_killed_supervisor_stop_on_their_own(start_server):
    gateway = two_workers(start_server)
    pids = list(worker_reports(gateway.url, 2))
    gateway.process.kill()
    gateway.process.wait()
    assert wait_until(lambda: all(gone(pid) for pid in pids)), pids
    assert refused(gateway.url)


def test_one_worker_is_one_process_and_the_studio_is_always_one(start_server):
    gateway = start_server("gateway")  # tests default to DEV_SERVER_WORKERS=1
    assert local_http.get(f"{gateway.url}/health").json()["worker"] == {"pid": gateway.process.pid, "count": 1}
    studio = start_server("studio", env=TWO)
    report = local_http.get(f"{studio.url}/health").json()["worker"]
    assert (report["pid"], report["count"]) == (studio.process.pid, 1) and "DuckDB" in report["note"]
    assert "DEV_SERVER_WORKERS=2 applies to the gateway only" in studio.output()
    for server in (gateway, studio):
        children = subprocess.run(["ps", "--ppid", str(server.process.pid), "-o", "pid="], capture_output=True,
                                  text=True).stdout.split()
        assert children == [], (server.role, children)


def test_a_bad_database_is_one_line_from_the_supervisor(server_env, data_dir: Path):
    from tests.kit.cli import assert_one_error_line, run_cli
    from tests.support import free_port

    data_dir.mkdir(parents=True)
    (data_dir / "dev-server.db").write_bytes(b"not sqlite at all" * 512)
    result = run_cli(["gateway", "--port", str(free_port())], {**server_env, **TWO})
    assert_one_error_line(result, "dev-server.db", "not a database")


def test_turns_on_two_workers_share_one_database(start_server, data_dir: Path):
    gateway = two_workers(start_server)
    clients = pinned_clients(gateway.url, 2, distinct=True)
    try:
        for index, client in enumerate(clients):
            chat_on(client, gateway.url, f"w{index}")
    finally:
        for client in clients:
            client.close()
    rows = sqlite_rows(data_dir / "dev-server.db", "SELECT thread_id, role FROM messages ORDER BY thread_id, seq")
    assert rows == [("w0", "user"), ("w0", "assistant"), ("w1", "user"), ("w1", "assistant")]


def test_the_workers_setting(monkeypatch: pytest.MonkeyPatch):
    assert Settings().workers_for("gateway") == (os.cpu_count() or 1)
    assert Settings(workers=3).workers_for("gateway") == 3
    assert Settings(workers=3).workers_for("studio") == 1
    monkeypatch.setenv("DEV_SERVER_WORKERS", "0")
    with pytest.raises(SettingsError, match="DEV_SERVER_WORKERS"):
        Settings.load()


def test_every_worker_serves_the_users_own_agents(start_server, tmp_path: Path):
    """Workers are spawned, so each one loads ``--agents`` again (from the same file)."""
    agents = tmp_path / "my_agents.py"
    agents.write_text('from dev_server import Agent, Memory\n\n'
                      'helper = Agent(id="helper", instructions="Help.", memory=Memory(last_messages=4))\n')
    gateway = start_server("gateway", env={**TWO, "DEV_SERVER_AGENTS": str(agents)}, wait=False)
    gateway.wait_healthy(timeout=START_S)
    clients = pinned_clients(gateway.url, 2, distinct=True)
    try:
        for index, client in enumerate(clients):
            body = {"conversationId": f"h{index}", "messages": [user_message(f"h{index}", "hello")]}
            response = client.post(f"{gateway.url}/api/agents/helper/chat", json=body)
            assert response.status_code == 200 and '"agentId":"helper"' in response.text, response.text
    finally:
        for client in clients:
            client.close()
