"""Scale-out (issue 15): chat turns/s and p50/p99 latency at 32 concurrent clients with 1 and
2 gateway replicas on a libsql server (sqld), against 1 gateway on the embedded file, all in
the same run on this machine. "machine busy" is the share of all cores in use during the
run (the load generator and sqld included): at 100% the machine, not the design, is the
limit, and a second replica can only show its worth on a second machine. Each client loops
on its own conversation (POST /api/chat read to [DONE], bench/load.mjs); with two replicas,
client i talks to replica i % 2 (what a round-robin balancer does, without one in the way).
Every gateway runs one worker with the local model and telemetry off, so the figures compare the storage paths.

Also reported: the libsql server requests one turn costs (reads and write requests, from
the gateways' ``/health``), and the CPU time of the gateways and of sqld per turn.

``python bench/scale_out.py [--seconds 10] [--clients 32] [--out FILE]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import date
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.load_requests import load, pct  # noqa: E402
from bench.servers import Server, cpu, server_env  # noqa: E402
from tests.sqld import Sqld  # noqa: E402
from tests.support import free_port  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def gateways(count: int, tmp: Path, db_url: str | None) -> list[Server]:
    tmp.mkdir(parents=True, exist_ok=True)
    started = []
    for i in range(count):
        env = server_env(tmp / f"data-{i}", free_port(), DEV_SERVER_WORKERS="1", DEV_SERVER_TELEMETRY="false",
                         **({"DEV_SERVER_DB_URL": db_url} if db_url else {}))
        port = free_port()
        started.append(Server(f"gateway-{i}", [sys.executable, "-m", "dev_server", "gateway", "--port", str(port)],
                              port, env, log_dir=tmp))
    for server in started:
        server.wait_ready()
    return started


def requests_made(servers: list[Server]) -> tuple[int, int]:
    reads = writes = 0
    for server in servers:
        counts = httpx.get(f"{server.url}/health").json()["stores"]["default"].get("requests")
        if counts:
            reads, writes = reads + counts["reads"], writes + counts["writes"]
    return reads, writes


def scenario(name: str, servers: list[Server], clients: int, seconds: float, sqld_pid: int | None) -> dict:
    threads = [f"scale-{uuid.uuid4()}" for _ in range(clients)]
    spec = {"mode": "turns", "bases": [s.url for s in servers], "clients": clients, "threads": threads}
    load({**spec, "count": 2})  # the threads exist, connections are warm
    before_requests, before_cpu = requests_made(servers), cpu(servers)
    before_sqld, before_machine = sqld_cpu(sqld_pid), machine_ticks()
    result = load({**spec, "seconds": seconds})
    after_machine = machine_ticks()
    after_requests = requests_made(servers)
    turns, latencies = result["done"], result["latenciesMs"]
    return {"name": name, "turns": turns, "rate": turns / (result["wallMs"] / 1000),
            "p50": pct(latencies, 0.5), "p99": pct(latencies, 0.99),
            "reads": (after_requests[0] - before_requests[0]) / turns,
            "writes": (after_requests[1] - before_requests[1]) / turns,
            "cpu_ms": (cpu(servers) - before_cpu) * 1000 / turns,
            "sqld_ms": (sqld_cpu(sqld_pid) - before_sqld) * 1000 / turns if sqld_pid else None,
            "busy": (after_machine[0] - before_machine[0]) / max(1, after_machine[1] - before_machine[1])}


def machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def sqld_cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep", type=Path, help="keep the servers' logs and data in this directory")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = args.keep or Path(tmp_name)
        for name, count, remote in (("1 gateway, embedded file (baseline)", 1, False),
                                    ("1 gateway, sqld", 1, True), ("2 gateways, sqld", 2, True)):
            sqld = Sqld(tmp / f"sqld-{count}-{remote}").start() if remote else None
            servers = gateways(count, tmp / f"gateways-{count}-{remote}", sqld.url if sqld else None)
            try:
                rows.append(scenario(name, servers, args.clients, args.seconds,
                                     sqld.server_pid if sqld else None))
            finally:
                for server in servers:
                    server.stop()
                if sqld:
                    sqld.stop()
            time.sleep(1)
    base = rows[0]["rate"]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    lines = [f"# Scale-out: {args.clients} clients, {args.seconds:g} s per scenario ({date.today()}, {commit})", "",
             "| scenario | turns/s | vs baseline | p50 ms | p99 ms | server reads/turn | write requests/turn "
             "| gateway CPU ms/turn | sqld CPU ms/turn | machine busy |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        sqld_ms = f"{row['sqld_ms']:.1f}" if row["sqld_ms"] is not None else "-"
        remote = row["sqld_ms"] is not None
        lines.append(f"| {row['name']} | {row['rate']:.1f} | {row['rate'] / base:.2f} | {row['p50']:.0f} | "
                     f"{row['p99']:.0f} | {row['reads']:.1f} | {row['writes']:.1f} | {row['cpu_ms']:.1f} | {sqld_ms} | "
                     f"{row['busy']:.0%} |"
                     if remote else
                     f"| {row['name']} | {row['rate']:.1f} | 1.00 | {row['p50']:.0f} | {row['p99']:.0f} | - | - | "
                     f"{row['cpu_ms']:.1f} | - | {row['busy']:.0%} |")
    lines += ["", f"2-replica / 1-replica on sqld: {rows[2]['rate'] / rows[1]['rate']:.2f}"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
