"""The gateway's workers (``DEV_SERVER_WORKERS``, dev_server/workers.py): real processes, real HTTP.

Requests on new connections land on either worker; SIGTERM to the supervisor stops them all
and exits 0; a dead worker is logged and not restarted, the last one's death ends the
supervisor with 1; a SIGKILLed supervisor's workers stop on their own. One worker is one
process, and the studio is always one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from dev_server.settings import Settings, SettingsError
from tests.support import sqlite_rows, user_message

TWO = {"DEV_SERVER_WORKERS": "2"}


def worker_reports(url: str, want: int, timeout: float = 20.0) -> dict[int, dict]:
    """``/health``'s ``worker`` by pid, over new connections (no keep-alive), until ``want``
    distinct pids answered."""
    seen: dict[int, dict] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < deadline:
        report = httpx.get(f"{url}/health", timeout=5).json()["worker"]
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
        httpx.get(f"{url}/health", timeout=1)
    except httpx.TransportError:
        return True
    return False


def test_two_workers_answer_and_sigterm_to_the_supervisor_stops_them_all(start_server):
    gateway = start_server("gateway", env=TWO)
    reports = worker_reports(gateway.url, 2)
    assert len(reports) == 2, reports
    assert sorted(r["index"] for r in reports.values()) == [0, 1]
    assert {r["count"] for r in reports.values()} == {2}
    assert gateway.process.pid not in reports  # the supervisor serves nothing itself
    gateway.process.send_signal(signal.SIGTERM)
    assert gateway.process.wait(timeout=15) == 0
    assert all(gone(pid) for pid in reports)
    assert refused(gateway.url)
    output = gateway.output()
    assert "SIGTERM: stopping 2 workers" in output and "Traceback" not in output


def test_a_dead_worker_is_logged_not_restarted_and_the_last_one_ends_the_supervisor(start_server):
    gateway = start_server("gateway", env=TWO)
    first, second = worker_reports(gateway.url, 2).values()
    os.kill(first["pid"], signal.SIGKILL)
    line = f"worker {first['index']} (pid {first['pid']}) exited with signal 9; not restarted, 1 left"
    assert wait_until(lambda: line in gateway.output()), gateway.output()
    assert set(worker_reports(gateway.url, 2, timeout=1)) == {second["pid"]}  # still served, by the other
    os.kill(second["pid"], signal.SIGKILL)
    assert gateway.process.wait(timeout=15) == 1
    assert "every worker has exited" in gateway.output()


def test_the_workers_of_a_killed_supervisor_stop_on_their_own(start_server):
    gateway = start_server("gateway", env=TWO)
    pids = list(worker_reports(gateway.url, 2))
    gateway.process.kill()
    gateway.process.wait()
    assert wait_until(lambda: all(gone(pid) for pid in pids)), pids
    assert refused(gateway.url)


def test_one_worker_is_one_process_and_the_studio_is_always_one(start_server):
    gateway = start_server("gateway")  # tests default to DEV_SERVER_WORKERS=1
    assert httpx.get(f"{gateway.url}/health").json()["worker"] == {"pid": gateway.process.pid, "index": 0, "count": 1}
    studio = start_server("studio", env=TWO)
    report = httpx.get(f"{studio.url}/health").json()["worker"]
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
    from tests.support import pinned_clients

    gateway = start_server("gateway", env=TWO)
    clients = pinned_clients(gateway.url, 2, distinct=True)
    try:
        for index, client in enumerate(clients):
            body = {"conversationId": f"w{index}", "messages": [user_message(f"m{index}", "hello")]}
            response = client.post(f"{gateway.url}/api/chat", json=body)
            assert response.status_code == 200 and response.text.rstrip().endswith("data: [DONE]")
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
