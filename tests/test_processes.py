"""Real processes: start-up, shutdown, and the one-line errors of a bad start."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from dev_server.storage.migrate import load_migrations
from tests.kit.cli import assert_one_error_line, run_cli
from tests.kit.local_http import local_http
from tests.support import REPO, free_port


def test_gateway_and_studio_started_together_share_one_migrated_database(start_server, data_dir: Path):
    gateway = start_server("gateway", wait=False)
    studio = start_server("studio", wait=False)
    g, s = gateway.wait_healthy(), studio.wait_healthy()
    assert (g["role"], s["role"]) == ("gateway", "studio")
    assert g["stores"]["default"]["path"] == s["stores"]["default"]["path"] == str(data_dir / "dev-server.db")
    assert s["stores"]["observability"]["open"] is True
    assert g["stores"]["observability"] == {"url": f"file:{data_dir / 'observability.duckdb'}", "open": False,
                                            "owner": "studio"}
    with sqlite3.connect(data_dir / "dev-server.db") as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM _migrations")]
    assert versions == [m.version for m in load_migrations("libsql")]
    assert gateway.stop() == 0 and studio.stop() == 0


def test_started_from_another_cwd_writes_nothing_there(start_server, tmp_path: Path, data_dir: Path):
    cwd = tmp_path / "somewhere"
    cwd.mkdir()
    server = start_server("gateway", cwd=cwd)
    server.stop()
    assert list(cwd.iterdir()) == []
    assert (data_dir / "dev-server.db").exists()
    assert not list((REPO / "dev_server").rglob("*.db"))


def wait_ready(url: str, timeout: float = 60) -> dict:
    """/health once it says "ok" (the models have warmed up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            health = local_http.get(f"{url}/health", timeout=1).json()
            if health["status"] == "ok":
                return health
            assert health["status"] == "starting" and health["models"]["ready"] is False
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} not ready after {timeout} s")


@pytest.mark.e2e  # the README's first command as a whole: make, both processes, the workers, Ctrl-C
@pytest.mark.parametrize("workers", [1, 2])
def test_make_dev_serves_both_prints_the_banner_and_one_ctrl_c_stops_both(server_env: dict[str, str], workers: int):
    gateway_port, studio_port = free_port(), free_port()
    env = {**server_env, "DEV_SERVER_GATEWAY_PORT": str(gateway_port), "DEV_SERVER_STUDIO_PORT": str(studio_port),
           "DEV_SERVER_WORKERS": str(workers)}
    make = subprocess.Popen(["make", "--no-print-directory", "dev"], cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    printed: list[str] = []
    reader = threading.Thread(target=lambda: printed.extend(make.stdout), daemon=True)
    reader.start()
    try:
        healthy = {port: wait_ready(f"http://127.0.0.1:{port}") for port in (gateway_port, studio_port)}
        assert {h["role"] for h in healthy.values()} == {"gateway", "studio"}
        assert healthy[gateway_port]["worker"]["count"] == workers and healthy[studio_port]["worker"]["count"] == 1
        deadline = time.monotonic() + 30  # the banner follows within a 0.1 s poll (longer on a loaded machine)
        while not any(line.startswith("  chat:") for line in printed) and time.monotonic() < deadline:
            time.sleep(0.05)
        stop_started = time.monotonic()
        os.killpg(make.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        make.wait(timeout=15)
        assert time.monotonic() - stop_started < 10
        with pytest.raises(ProcessLookupError):
            os.killpg(make.pid, 0)  # nothing of the session is left: no worker outlived its supervisor
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()
        reader.join(timeout=5)  # the pipe's end: all that was printed is read
        make.stdout.close()
    output = "".join(printed)
    for port in (gateway_port, studio_port):
        with pytest.raises(httpx.TransportError):
            local_http.get(f"http://127.0.0.1:{port}/health", timeout=1)
    assert "gateway | " in output and "studio  | " in output
    assert "Traceback" not in output
    lines = output.splitlines()
    assert lines[0].startswith("fetch_studio_ui: ")  # says what it does with the Studio UI first (here: already there)
    assert f"  Studio: http://localhost:{studio_port}/" in lines
    assert f"  chat:   POST http://localhost:{gateway_port}/api/chat" in lines
    models = lines[lines.index("  models:") + 1:]
    for agent in ("chat-agent", "docs-agent", "orchestrator-agent"):
        assert any(line.startswith(f"    {agent} -> ") for line in models), agent
    assert any("local model" in line for line in models)  # no provider key in the test environment
    assert "models ready in" in output


def test_health_says_starting_until_the_models_are_warm_then_ok(start_server):
    gateway = start_server("gateway")  # answers at once, while litellm still imports
    first = local_http.get(f"{gateway.url}/health").json()
    assert first["status"] in ("starting", "ok")
    ready = wait_ready(gateway.url)
    assert ready["models"]["ready"] is True and ready["models"]["warmUpSeconds"] > 0
    assert "models ready in" in gateway.output()


def test_the_health_probe_command_exits_0_only_for_a_ready_server(start_server, server_env):
    gateway = start_server("gateway")
    wait_ready(gateway.url)
    env = {**server_env, "DEV_SERVER_GATEWAY_PORT": str(gateway.port)}
    assert run_cli(["health", "gateway"], env).returncode == 0
    down = run_cli(["health", "studio"], {**server_env, "DEV_SERVER_STUDIO_PORT": str(free_port())})
    assert down.returncode == 1 and down.stderr.startswith("unhealthy: studio at http://127.0.0.1:")
    assert_one_error_line(run_cli(["health"], server_env), "required: role", "dev-server health --help")


def test_unknown_command(server_env):
    assert_one_error_line(run_cli(["worker"], server_env), "invalid choice: 'worker'", "dev-server --help")


def test_port_in_use(server_env):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert_one_error_line(run_cli(["gateway", "--port", str(port)], server_env), f"127.0.0.1:{port}", "in use")


def test_unwritable_data_dir(server_env, tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {**server_env, "DEV_SERVER_DATA_DIR": str(blocker / "data")}
    assert_one_error_line(run_cli(["gateway", "--port", str(free_port())], env), "cannot create data directory")


def test_corrupt_database(server_env, data_dir: Path):
    data_dir.mkdir(parents=True)
    (data_dir / "dev-server.db").write_bytes(b"not sqlite at all" * 512)
    result = run_cli(["studio", "--port", str(free_port())], server_env)
    assert_one_error_line(result, "dev-server.db", "not a database")


def test_invalid_setting(server_env):
    env = {**server_env, "DEV_SERVER_GATEWAY_PORT": "http"}
    assert_one_error_line(run_cli(["gateway"], env), "DEV_SERVER_GATEWAY_PORT")


def test_duckdb_held_by_another_process_leaves_the_studio_serving(start_server, data_dir: Path):
    data_dir.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(60)",
         str(data_dir / "observability.duckdb")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        studio = start_server("studio")
        health = wait_ready(studio.url)
        assert health["stores"]["default"]["open"] is True
        observability = health["stores"]["observability"]
        assert observability["open"] is False and "lock" in observability["error"].lower()
        assert studio.output().count("observability storage disabled") == 1
        assert local_http.get(f"{studio.url}/api/memory/threads").status_code == 200
        assert local_http.get(f"{studio.url}/api/agents").status_code == 200
        traces = local_http.post(f"{studio.url}/api/observability/traces/query", json={})
        assert traces.status_code == 503 and "lock" in traces.json()["error"].lower()
    finally:
        holder.kill()
        holder.communicate()
