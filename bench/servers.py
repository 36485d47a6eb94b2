"""Server processes of bench/workload.py, with their CPU time and RSS read from /proc (Linux)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def server_env(data: Path, studio_port: int, **extra: str) -> dict[str, str]:
    """The environment our servers run in: this one without provider keys (the local model
    answers), quiet logs, ``data`` as the data directory, the studio on ``studio_port``."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(DEV_SERVER_DATA_DIR=str(data), DEV_SERVER_LOG_LEVEL="warning", DEV_SERVER_LOCAL_MODEL_ONLY="true",
               DEV_SERVER_STUDIO_PORT=str(studio_port), **extra)
    return env


def status_ok(health: Any) -> bool:
    """Our servers' (and the bare server's) ``/health`` when ready."""
    return isinstance(health, dict) and health.get("status") == "ok"


class Server:
    def __init__(self, name: str, command: list[str], port: int, env: dict[str, str],
                 log_dir: Path | None = None, cwd: Path = REPO, ready: Callable[[Any], bool] = status_ok) -> None:
        """``log_dir``: where the server's output goes (``<name>.log``, shown if it fails to
        start); without it the output is dropped. ``cwd``: where it runs (``python -m
        dev_server`` there runs that checkout's code). ``ready``: whether a ``/health`` body
        says the server is ready (Mastra's answers ``{"success": true}``)."""
        self.name, self.port, self.ready = name, port, ready
        self.url = f"http://127.0.0.1:{port}"
        self.log = log_dir / f"{name}.log" if log_dir else None
        with self.log.open("wb") if self.log else open(os.devnull, "wb") as log:
            self.proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
        self.snapshots = 0  # tracemalloc snapshots asked for (bench/traced.py)

    def wait_ready(self, timeout: float = 60, poll_s: float = 0.1) -> None:
        """Until ``/health`` says the server is ready (``status: ok``), asked every ``poll_s``."""
        try:
            self._wait_ready(timeout, poll_s)
        except RuntimeError as exc:
            if self.log is None:
                raise
            raise RuntimeError(f"{exc}; its output ends:\n{self.log.read_text(errors='replace')[-2000:]}") from None

    def _wait_ready(self, timeout: float, poll_s: float) -> None:
        deadline = time.monotonic() + timeout
        # one client for every poll: a new one per poll loads the CA bundle (~15 ms of CPU),
        # taken from the process whose start is being measured
        with httpx.Client(timeout=1) as client:
            while time.monotonic() < deadline:
                try:
                    if self.ready(client.get(f"{self.url}/health").json()):
                        return
                except (httpx.TransportError, ValueError):
                    pass
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
                time.sleep(poll_s)
        raise RuntimeError(f"{self.name} was not ready within {timeout} s")

    def pids(self) -> list[int]:
        """The server's process and its descendants (uvicorn workers, if any)."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry.name))
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    def cpu_s(self) -> float:
        total = 0.0
        for pid in self.pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
        return total

    def rss_mb(self) -> float:
        """Resident memory of the server's processes: their PSS (each shared page split between
        the processes sharing it, so pages the workers share are not counted twice), else their RSS."""
        total = 0.0
        for pid in self.pids():
            try:
                rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
                total += next(int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")) * 1024
            except (OSError, StopIteration):
                try:
                    total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
                except OSError:
                    continue
        return total / 2**20

    def largest_rss_mb(self) -> float:
        """The largest resident set (VmRSS) of the server's processes: a worker, or the supervisor."""
        largest = 0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                largest = max(largest, int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE)
        return largest / 2**20

    def snapshot(self, out: Path, timeout: float = 120) -> Path:
        """Ask a server started through bench/traced.py for a tracemalloc snapshot; its path."""
        path = out.with_name(f"{out.name}.{self.snapshots}")
        self.snapshots += 1
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} wrote no snapshot to {path}")
            with contextlib.suppress(httpx.TransportError):  # a request wakes the loop, so the signal handler runs now
                httpx.get(f"{self.url}/health", timeout=5)
            time.sleep(0.2)
        return path

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def cpu(servers: list[Server]) -> float:
    return sum(s.cpu_s() for s in servers)
