"""Turns/s at C concurrent clients on a gateway of one worker vs N (``DEV_SERVER_WORKERS``).

Both gateways run at once on one data directory, exporting to one studio (as ``make dev``
does), and are measured in alternating rounds (1, N, 1, N, ...) so drift on a shared
machine hits both alike; the one-worker gateway is the baseline. Each round is
``bench/workload.py``'s concurrency scenario (bench/load.mjs: each client loops turns on its
own thread, read to ``[DONE]``). Printed per gateway: the median turns/s, the median cores
used by the gateway's processes, by gateway + studio (user+system time from /proc over
wall time) and by the load generator (Node, on the same cores), and the gateway's CPU per
turn (which says whether workers add cost per turn, whatever the machine's load).

Run: ``.venv/bin/python bench/workers.py [--clients 32] [--workers 2] [--rounds 5] [--seconds 5]``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.load_requests import concurrent  # noqa: E402
from bench.report import machine  # noqa: E402
from bench.servers import Server, server_env  # noqa: E402
from tests.support import free_port  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        studio_port = free_port()
        env = server_env(data, studio_port)
        studio = Server("studio", [sys.executable, "-m", "dev_server", "studio", "--port", str(studio_port)],
                        studio_port, env)
        studio.wait_ready()
        gateways: dict[int, Server] = {}
        for count in (1, args.workers):
            port = free_port()
            gateways[count] = Server(f"gateway x{count}",
                                     [sys.executable, "-m", "dev_server", "gateway", "--port", str(port)],
                                     port, {**env, "DEV_SERVER_WORKERS": str(count)})
        try:
            for gateway in gateways.values():
                gateway.wait_ready()
            time.sleep(2)  # every worker warm, not only the one that answered /health
            print(f"machine: {'; '.join(machine())}; {args.clients} clients, "
                  f"{args.rounds} rounds of {args.seconds:g} s")
            results: dict[int, list[tuple[float, float, float]]] = {count: [] for count in gateways}
            for round_ in range(args.rounds + 1):  # round 0 warms up every worker and is dropped
                for count, gateway in gateways.items():
                    before, studio_before, started = gateway.cpu_s(), studio.cpu_s(), time.perf_counter()
                    client_before = _children_cpu_s()
                    done, wall = concurrent(gateway.url, args.clients, args.seconds)
                    elapsed = time.perf_counter() - started
                    cores = (gateway.cpu_s() - before) / elapsed
                    total = cores + (studio.cpu_s() - studio_before) / elapsed
                    client = (_children_cpu_s() - client_before) / elapsed
                    if round_:
                        results[count].append((done / wall, cores, total, client, cores / (done / wall) * 1000))
                        print(f"  round {round_}, {count} worker(s): {done / wall:6.1f} turns/s, gateway {cores:.2f}"
                              f" cores, with studio {total:.2f}, load generator {client:.2f}", flush=True)
            print(f"{'workers':>8} {'turns/s (median)':>17} {'gateway cores':>14} {'+ studio':>9} {'client':>7}"
                  f" {'gateway CPU ms/turn':>20}")
            for count, rows in results.items():
                m = [statistics.median(column) for column in zip(*rows, strict=False)]
                print(f"{count:>8} {m[0]:>17.1f} {m[1]:>14.2f} {m[2]:>9.2f} {m[3]:>7.2f} {m[4]:>20.2f}")
            base, more = (statistics.median(r[0] for r in results[c]) for c in (1, args.workers))
            print(f"ratio {args.workers} workers / 1: {more / base:.2f}x")
        finally:
            for server in [*gateways.values(), studio]:
                server.stop()


def _children_cpu_s() -> float:
    """CPU of this process's finished children: the load generator runs (the servers are
    still running, so not counted)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
