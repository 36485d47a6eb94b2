"""What the studio's own telemetry costs a turn (issue 31, item 3).

Two studios run side by side, the same but for ``DEV_SERVER_TELEMETRY`` (on: each turn's
spans go through the export queue and the OTLP mapping into DuckDB; off: no spans). Both
answer sequential turns of ``POST /api/agents/chat-agent/stream`` on one thread each
(Observational Memory off, the local model answering, logging at ``info`` as ``make dev``
does: a run's two log lines are exported with its spans), in alternating rounds so that the
machine's load falls on both alike. Reported: CPU per turn of each studio process (user +
system, read from /proc, the export thread included) and the share of the telemetry-on
turn's CPU that telemetry takes: (on - off) / on.

Two workloads: ``small`` (a one-line message) and ``big`` (a message of ``--big-kb``
kilobytes, so each model generation's input, the thread's last messages, is tens of
kilobytes, as on a long conversation).
``--baseline DIR`` runs the studios of another checkout (say a worktree of the commit before
a change) in the same rounds, so before and after are measured under the same load.
Run: ``nice -n 5 .venv/bin/python bench/span_cost.py [--turns 200] [--rounds 3] [--big-kb 4]
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.load_requests import load  # noqa: E402
from bench.report import commit, machine  # noqa: E402
from bench.servers import Server, server_env  # noqa: E402
from tests.support import free_port  # noqa: E402


def turns(server: Server, thread: str, text: str, count: int) -> float:
    """CPU seconds the studio spent on ``count`` sequential turns (spans exported included:
    the queue is waited for before the CPU is read)."""
    body = json.dumps({"messages": [{"role": "user", "content": text}], "memory": {"thread": thread, "resource": "r"}})
    before = server.cpu_s()
    load({"mode": "post", "base": server.url, "path": "/api/agents/chat-agent/stream", "body": body, "clients": 1,
          "count": count})
    time.sleep(1.2)  # the export queue's worker runs every 0.5 s: what these turns queued is written
    return server.cpu_s() - before


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200, help="turns per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--big-kb", type=int, default=4)
    parser.add_argument("--baseline", type=Path, help="another checkout (a worktree of an earlier commit), whose"
                        " studios run in the same rounds")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = table(args, *measure(args))
    print(text)
    out = args.out or REPO / "bench" / "results" / f"{time.strftime('%Y-%m-%d')}-{commit()}-span-cost.md"
    out.write_text(text + "\n")
    print(f"written to {out}")


def measure(args: argparse.Namespace) -> tuple[dict[tuple[str, str, str], float], list[str], list[str],
                                                 tuple[float, ...]]:
    """CPU seconds per (workload, checkout, telemetry) over every round (``args``: turns, rounds,
    big_kb, baseline); the checkouts, the workloads and the load average at the start."""
    load_start = os.getloadavg()
    big = ("lorem ipsum dolor sit amet " * (args.big_kb * 40))[:args.big_kb * 1024]
    workloads = {"small": "hello there", "big": big}
    cpu: dict[tuple[str, str, str], float] = {}
    checkouts = ["this checkout"] + ([str(args.baseline)] if args.baseline else [])

    def command(checkout: str, port: int) -> list[str]:
        if checkout == "this checkout":
            return [sys.executable, "-m", "dev_server", "studio", "--port", str(port)]
        return [sys.executable, "-c", f"import sys; sys.path.insert(0, {checkout!r}); from dev_server.__main__ "
                "import main; sys.exit(main(sys.argv[1:]))", "studio", "--port", str(port)]

    with tempfile.TemporaryDirectory() as tmp:
        servers = {}
        for checkout in checkouts:
            for telemetry in ("on", "off"):
                port = free_port()
                env = server_env(Path(tmp) / f"data{len(servers)}", free_port(), DEV_SERVER_OM_ENABLED="false",
                                 DEV_SERVER_TELEMETRY="true" if telemetry == "on" else "false")
                env["DEV_SERVER_LOG_LEVEL"] = "info"  # as make dev: each run logs, and exports, two lines
                servers[checkout, telemetry] = Server(f"studio-{telemetry}", command(checkout, port), port, env,
                                                      Path(tmp))
        try:
            for server in servers.values():
                server.wait_ready(120)
            for name, text in workloads.items():
                for server in servers.values():  # warm: the thread exists, its window is full
                    turns(server, name, text, 20)
                for _ in range(args.rounds):
                    for key, server in servers.items():
                        cpu[(name, *key)] = cpu.get((name, *key), 0.0) + turns(server, name, text, args.turns)
        finally:
            for server in servers.values():
                server.stop()
    return cpu, checkouts, list(workloads), load_start


def per_turn_ms(cpu: dict[tuple[str, str, str], float], count: int, workload: str,
                checkout: str = "this checkout") -> tuple[float, float]:
    """CPU ms per turn with telemetry on and off."""
    return cpu[workload, checkout, "on"] * 1000 / count, cpu[workload, checkout, "off"] * 1000 / count


def table(args: argparse.Namespace, cpu: dict[tuple[str, str, str], float], checkouts: list[str],
          workloads: list[str], load_start: tuple[float, ...]) -> str:
    count = args.turns * args.rounds
    lines = [f"# Telemetry's share of a studio turn's CPU ({commit()})", "", *(f"- {line}" for line in machine()),
             f"- load average at the start: {' '.join(f'{v:.2f}' for v in load_start)}, at the end: "
             f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}", "",
             f"{count} sequential turns per workload and studio, in {args.rounds} alternating rounds; OM off; "
             f"big = a {args.big_kb} KB message per turn", "",
             "| checkout | workload | CPU ms/turn, telemetry on | CPU ms/turn, off | telemetry's share of the turn |",
             "|---|---|---|---|---|"]
    for checkout in checkouts:
        for name in workloads:
            on, off = per_turn_ms(cpu, count, name, checkout)
            lines.append(f"| {checkout} | {name} | {on:.2f} | {off:.2f} | {(on - off) / on * 100:.1f} % |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
