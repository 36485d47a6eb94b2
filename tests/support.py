"""Helpers for tests that need real processes and real HTTP."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.kit import judge
from tests.kit.local_http import local_http

REPO = Path(__file__).resolve().parents[1]
JS_DIR = REPO / "tests" / "js"


# Servers under test are one process unless a test asks for more, so the suite behaves the
# same on any number of cores (the gateway's default is one worker per core).
ONE_WORKER = {"DEV_SERVER_WORKERS": "1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """One ``python -m dev_server ROLE`` child process with its output captured to a file; one
    worker unless ``env`` sets ``DEV_SERVER_WORKERS``."""

    def __init__(self, role: str, *, env: dict[str, str], python: str, port: int | None = None,
                 cwd: Path | str | None = None, args: list[str] | None = None) -> None:
        self.role = role
        self.env = {**ONE_WORKER, **env}
        self.python = python
        self.port = port or free_port()
        self.cwd = cwd or REPO
        self.args = args or []
        self.process: subprocess.Popen | None = None
        self.log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        import tempfile

        self.log_path = Path(tempfile.mkstemp(prefix=f"{self.role}-", suffix=".log")[1])
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [self.python, "-m", "dev_server", self.role, "--port", str(self.port), *self.args],
            cwd=self.cwd, env=self.env, stdout=self._log, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def wait_healthy(self, timeout: float = 60.0) -> dict[str, Any]:
        """``/health`` once it answers 200 (generous: with workers, each is a spawned process
        that imports the app first, slow on a loaded machine)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.role} exited with {self.process.returncode}:\n{self.output()}")
            try:
                response = local_http.get(f"{self.url}/health", timeout=1.0)
                if response.status_code == 200:
                    return response.json()
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"{self.role} not healthy after {timeout}s:\n{self.output()}")

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


def worker_pid(client: httpx.Client, url: str) -> int:
    return client.get(f"{url}/health", timeout=5).json()["worker"]["pid"]


def pinned_clients(url: str, count: int, *, distinct: bool, timeout: float = 60.0) -> list[httpx.Client]:
    """``count`` clients of one keep-alive connection each; with ``distinct``, each one's
    connection was accepted by a different worker (a connection stays with its worker), so
    what they send is served by different processes. Close them when done."""
    kept: list[httpx.Client] = []
    pids: set[int] = set()
    deadline = time.monotonic() + timeout  # a worker may still be starting
    while time.monotonic() < deadline:
        client = httpx.Client(timeout=60, limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
        pid = worker_pid(client, url)
        if distinct and pid in pids:
            client.close()
            time.sleep(0.01)
            continue
        pids.add(pid)
        kept.append(client)
        if len(kept) == count:
            return kept
    for client in kept:
        client.close()
    raise AssertionError(f"{url}: only {len(pids)} distinct workers answered in {timeout} s")


def run_node(script: str, payload: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    """Run a harness script from tests/js with one JSON object as its input; its JSON answer.
    Scripts that can (tests.kit.judge.SERVED) are answered by the worker's one node judge."""
    if script in judge.SERVED:
        return judge.ask(script, payload, timeout)
    result = subprocess.run(["node", str(JS_DIR / script)], input=json.dumps(payload), text=True,
                            capture_output=True, timeout=timeout, cwd=JS_DIR)
    if result.returncode != 0:
        raise AssertionError(f"{script} failed ({result.returncode}):\n{result.stderr}\n{result.stdout}")
    return json.loads(result.stdout)


def bound_socket(port: int = 0) -> socket.socket:
    """A socket bound on 127.0.0.1 (``port`` 0: one the system picks), for a server to listen
    on: held from the start, no other process can take the port before the server binds."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


class LiveApp:
    """A real uvicorn server in a thread, for apps built in the test (injected LLM, auth), on
    ``sock`` if given, else on ``port``, else on a socket bound here (``bound_socket``)."""

    def __init__(self, app, port: int | None = None, sock: socket.socket | None = None) -> None:
        import uvicorn

        self.socket = sock if sock is not None or port is not None else bound_socket()
        if self.socket is not None:
            port = self.socket.getsockname()[1]
        self.port = port
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="on"))
        self.thread = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveApp:
        import threading

        sockets = [self.socket] if self.socket is not None else None
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": sockets}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("in-thread server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        if self.socket is not None:
            self.socket.close()


def wait_until(ready: Callable[[], Any], timeout: float = 30.0, poll_s: float = 0.05,
               seen: Callable[[], Any] | None = None) -> Any:
    """Poll ``ready`` until it gives something true, and return that; past ``timeout`` the
    test fails, with ``seen()`` (what there was instead) as its message. For what a server
    does in the background: a fixed pause is too short on a loaded machine."""
    deadline = time.monotonic() + timeout
    while not (value := ready()):
        assert time.monotonic() < deadline, seen() if seen else f"not ready after {timeout} s"
        time.sleep(poll_s)
    return value


def sqlite_rows(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    import sqlite3

    with sqlite3.connect(path) as conn:
        return conn.execute(sql, params).fetchall()


def user_message(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def wait_models_ready(server: ServerProcess, timeout: float = 60.0) -> dict[str, Any]:
    """Wait until ``/health`` says the model layer is warm (``models.ready``)."""
    deadline = time.monotonic() + timeout
    health = server.wait_healthy()
    while not health.get("models", {}).get("ready"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"models not ready after {timeout}s: {health}\n{server.output()}")
        time.sleep(0.1)
        health = server.wait_healthy()
    return health


def frames_of(response: httpx.Response, limit: int | None = None) -> list[tuple[int, str]]:
    """The (SSE id, data) frames of a streamed response: all of them, or the first ``limit``."""
    frames: list[tuple[int, str]] = []
    frame_id = None
    for line in response.iter_lines():
        if line.startswith("id: "):
            frame_id = int(line[4:])
        elif line.startswith("data: "):
            frames.append((frame_id, line[6:]))
            if limit is not None and len(frames) >= limit:
                break
    return frames


def ui_chunks(frames: list[tuple[int, str]]) -> list[dict[str, Any]]:
    """The UI message stream chunks of SSE frames (``[DONE]`` left out)."""
    return [json.loads(data) for _, data in frames if data != "[DONE]"]
