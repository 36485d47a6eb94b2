"""Start-up time of each process: spawn to the first 200 from /health.

Baseline, in the same run: a bare uvicorn + FastAPI app with one route, started the same
way. Reports the median of several starts and the ratio to the baseline.
Run: .venv/bin/python bench/startup.py [starts]
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.support import free_port  # noqa: E402

BARE_APP = (
    "import sys, uvicorn; from fastapi import FastAPI; app = FastAPI()\n"
    "@app.get('/health')\ndef health(): return {'ok': True}\n"
    "uvicorn.run(app, port=int(sys.argv[1]), log_level='warning')\n"
)


def time_to_health(command: list[str], port: int, env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).status_code == 200:
                    return time.perf_counter() - started
            except httpx.TransportError:
                time.sleep(0.005)
            if proc.poll() is not None:
                raise RuntimeError(f"{command} exited early")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)


def main() -> None:
    starts = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    results: dict[str, list[float]] = {"bare uvicorn app": [], "gateway": [], "studio": []}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "DEV_SERVER_DATA_DIR": tmp}
        for i in range(starts):
            port = free_port()
            results["bare uvicorn app"].append(time_to_health([sys.executable, "-c", BARE_APP, str(port)], port, env))
            for role in ("gateway", "studio"):
                port = free_port()
                results[role].append(time_to_health([sys.executable, "-m", "app", role, "--port", str(port)],
                                                     port, env))
    baseline = statistics.median(results["bare uvicorn app"])
    for name, values in results.items():
        median = statistics.median(values)
        print(f"{name:<17}: median {median * 1000:6.0f} ms, max {max(values) * 1000:6.0f} ms over {len(values)}"
              f" starts; ratio to bare {median / baseline:.2f}")


if __name__ == "__main__":
    main()
