"""What a process costs to start and to keep: RSS per process, time to ``status: ok``, the
first turn, and RSS again after a load (issue 31, item 4).

Run as ``make dev`` runs them, offline (the built-in local model, no provider key,
chat-agent with its default memory: history, title, Observational Memory; telemetry on).
One studio, then a gateway with one worker, then a gateway with two workers (both export
their spans to the studio). For each, in order:

- seconds from spawn to the first ``/health`` that says ``status: "ok"``, and the CPU its
  processes used until then (on a loaded machine the seconds stretch; the CPU much less);
- the RSS of each of its processes a second later (the supervisor and each worker of a
  gateway with workers), and which heavy native libraries each has loaded (read from
  ``/proc/<pid>/maps``: numpy, onnxruntime, duckdb, tiktoken, litellm's tokenizers);
- the first turn's latency, sent right after ``ok`` (the gateway's ``POST /api/chat``, the
  studio's ``POST /api/agents/chat-agent/stream``), read to the end;
- ``--seconds`` of turns from ``--clients`` loops (the gateway's over ``--threads``
  conversations, the studio's each on a new thread), then the RSS of each process again,
  and its ratio to the RSS after start, and the CPU per turn of the load.

Baseline in the same run: a bare uvicorn + FastAPI app (one route), its RSS after start.
``--baseline DIR``: another checkout (say a worktree of the commit before a change), each of
its processes measured right after this checkout's, so before and after meet the same load.
Run: ``nice -n 5 .venv/bin/python bench/footprint.py [--seconds 30] [--clients 4] [--threads 20]
[--baseline DIR]``.
Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.load_requests import load  # noqa: E402
from bench.report import commit, machine  # noqa: E402
from bench.servers import Server, server_env  # noqa: E402
from bench.startup import BARE_APP  # noqa: E402
from tests.support import free_port  # noqa: E402

HEAVY = {"numpy": "_multiarray_umath", "onnxruntime": "onnxruntime_pybind11", "duckdb": "_duckdb",
         "tiktoken": "_tiktoken", "tokenizers": "tokenizers."}
MB = 2**20


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def loaded(pid: int) -> list[str]:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return sorted(name for name, marker in HEAVY.items() if marker in maps)


def processes(server: Server) -> dict[int, str]:
    """The server's processes by pid, each named: the one process, or the supervisor and its
    workers (multiprocessing's resource tracker left out: it runs no app)."""
    named = {}
    for pid in server.pids():
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "resource_tracker" in command:
            continue
        named[pid] = "process" if pid == server.proc.pid and len(server.pids()) == 1 else (
            "supervisor" if pid == server.proc.pid else "worker")
    return named


def wait_ok(server: Server, started: float, timeout: float = 120) -> float:
    server.wait_ready(timeout, poll_s=0.02)
    return time.perf_counter() - started


def first_turn_ms(server: Server, role: str) -> float:
    started = time.perf_counter()
    if role == "studio":
        body = {"messages": [{"role": "user", "content": "hello"}],
                "memory": {"thread": f"first-{server.name}", "resource": "r"}}
        response = httpx.post(f"{server.url}/api/agents/chat-agent/stream", json=body, timeout=120)
        response.raise_for_status()
    else:
        body = {"id": "b", "trigger": "submit-message", "conversationId": f"first-{server.name}",
                "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}]}
        response = httpx.post(f"{server.url}/api/chat", json=body, timeout=120)
        if response.status_code != 200 or not response.text.rstrip().endswith("[DONE]"):
            raise RuntimeError(f"first turn failed: {response.status_code} {response.text[-300:]}")
    return (time.perf_counter() - started) * 1000


def run_load(server: Server, role: str, seconds: float, clients: int, threads: int) -> int:
    if role == "studio":  # each request on a thread of its own (``post`` mode numbers them)
        body = json.dumps({"messages": [{"role": "user", "content": "hello"}],
                           "memory": {"thread": "load-{i}", "resource": "r"}})
        done = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            done += load({"mode": "post", "base": server.url, "path": "/api/agents/chat-agent/stream",
                          "body": body.replace("{i}", f"{done}-{{i}}"), "clients": clients,
                          "count": clients * 10})["done"]
        return done
    spec = {"mode": "turns", "base": server.url, "clients": clients, "threadCount": threads,
            "threadPrefix": f"load-{server.name}".replace(" ", ""), "seconds": seconds}
    return load(spec)["done"]


def measure(name: str, role: str, command: list[str], env: dict[str, str], log_dir: Path,
            args: argparse.Namespace, cwd: Path = REPO) -> dict:
    port = int(command[command.index("--port") + 1]) if "--port" in command else int(command[-1])
    started = time.perf_counter()
    server = Server(name.replace(" ", "-").replace("/", "_"), command, port, env, log_dir, cwd)
    try:
        result: dict = {"name": name, "ok_s": wait_ok(server, started), "ok_cpu_s": server.cpu_s()}
        time.sleep(1.0)
        result["start"] = {pid: (kind, rss_mb(pid), loaded(pid)) for pid, kind in processes(server).items()}
        if role == "bare":
            return result
        result["first_turn_ms"] = first_turn_ms(server, role)
        cpu_before = server.cpu_s()
        result["turns"] = run_load(server, role, args.seconds, args.clients, args.threads)
        result["cpu_ms_per_turn"] = (server.cpu_s() - cpu_before) * 1000 / max(1, result["turns"])
        time.sleep(1.0)
        result["after"] = {pid: (kind, rss_mb(pid), loaded(pid)) for pid, kind in processes(server).items()}
        return result
    finally:
        server.stop()


def report(results: list[dict], args: argparse.Namespace) -> str:
    lines = [f"# Footprint ({commit()})", "", *(f"- {line}" for line in machine()),
             f"- load average at the start: {args.load_start}", "",
             f"load: {args.seconds:.0f} s of turns from {args.clients} clients over {args.threads} threads per"
             " process; RSS in MB (VmRSS), per process", "",
             "| process | ok after s | CPU s until ok (all its processes) | first turn ms | RSS after start |"
             " RSS after load | after/start | turns | CPU ms/turn | heavy libraries loaded (start -> after load) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        after = result.get("after", {})
        for pid, (kind, start_mb, libs) in result["start"].items():
            later = after.get(pid)
            later_mb = f"{later[1]:.0f}" if later else "-"
            ratio = f"{later[1] / start_mb:.2f}" if later else "-"
            later_libs = ", ".join(later[2]) if later else "-"
            lines.append(f"| {result['name']} {kind} {pid} | {result['ok_s']:.2f} | {result['ok_cpu_s']:.2f} | "
                         f"{result.get('first_turn_ms', 0):.0f} | {start_mb:.0f} | {later_mb} | {ratio} | "
                         f"{result.get('turns', '-')} | {result.get('cpu_ms_per_turn', 0):.1f} | "
                         f"{', '.join(libs) or 'none'} -> {later_libs or 'none'} |")
    lines += ["", f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--baseline", type=Path, help="another checkout (a worktree of an earlier commit), each of"
                        " whose processes is measured right after this checkout's")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.load_start = " ".join(f"{v:.2f}" for v in os.getloadavg())
    results = run(args)
    text = report(results, args)
    print(text)
    out = args.out or REPO / "bench" / "results" / f"{time.strftime('%Y-%m-%d')}-{commit()}-footprint.md"
    out.write_text(text + "\n")
    print(f"written to {out}")


def run(args: argparse.Namespace) -> list[dict]:
    """Every process measured (``args``: seconds, clients, threads, baseline), the bare app first."""
    python = sys.executable
    checkouts = {"": REPO} | ({f"{args.baseline.name}: ": args.baseline} if args.baseline else {})
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        envs, studios = {}, {}
        for label in checkouts:
            envs[label] = server_env(tmp_path / f"data{len(envs)}", free_port())
            envs[label].pop("DEV_SERVER_LOCAL_MODEL_ONLY")  # as make dev: no key, so the local model answers

        def serve(label: str, role: str) -> list[str]:
            port = envs[label]["DEV_SERVER_STUDIO_PORT"] if role == "studio" else str(free_port())
            return [python, "-m", "dev_server", role, "--port", port]

        bare_port = free_port()
        results = [measure("bare", "bare", [python, "-c", BARE_APP, str(bare_port)], envs[""], tmp_path, args)]
        for label, checkout in checkouts.items():  # each checkout's, one after the other, under the same load
            results.append(measure(f"{label}studio", "studio", serve(label, "studio"), envs[label], tmp_path, args,
                                   checkout))
        try:
            for label, checkout in checkouts.items():  # the studios that receive the gateways' spans
                command = serve(label, "studio")
                studios[label] = Server(f"receiver{len(studios)}", command, int(command[-1]), envs[label], tmp_path,
                                        checkout)
                studios[label].wait_ready(120)
            for workers in (1, 2):
                for label, checkout in checkouts.items():
                    results.append(measure(f"{label}gateway x{workers}", "gateway", serve(label, "gateway"),
                                           {**envs[label], "DEV_SERVER_WORKERS": str(workers)}, tmp_path, args,
                                           checkout))
        finally:
            for studio in studios.values():
                studio.stop()
    return results


if __name__ == "__main__":
    main()
