"""Bulk writes through the studio: ``save-messages`` (10k messages in batches of 500, msgs/s)
and ``POST /memory/threads`` (8 clients, threads/s), plus a burst of first turns on new
threads through the gateway (p50 vs one sequential turn). The same scenarios as
``bench/workload.py``, alone, repeated ``--runs`` times on one pair of servers; medians.
Also the studio's CPU (user+system, all its threads) per batch and per thread created:
steadier than rates on a machine shared with other work.

Run: .venv/bin/python bench/bulk_writes.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.servers import Server, server_env  # noqa: E402
from bench.workload import burst, create_threads, save_messages, sequential  # noqa: E402
from tests.support import free_port  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        studio_port, gateway_port = free_port(), free_port()
        env = server_env(data, studio_port)
        studio = Server("studio", [sys.executable, "-m", "dev_server", "studio", "--port", str(studio_port)],
                        studio_port, env)
        gateway = Server("gateway", [sys.executable, "-m", "dev_server", "gateway", "--port", str(gateway_port)],
                         gateway_port, env)
        try:
            studio.wait_ready()
            gateway.wait_ready()
            asyncio.run(save_messages(studio.url, 1_000, 500))  # warm-up
            create_threads(studio.url, 200, 8)
            msgs, threads, first, ratio, batch_cpu, thread_cpu = [], [], [], [], [], []
            for _ in range(args.runs):
                before = studio.cpu_s()
                msgs.append(asyncio.run(save_messages(studio.url, 10_000, 500)))
                batch_cpu.append((studio.cpu_s() - before) / 20 * 1000)
                before = studio.cpu_s()
                threads.append(create_threads(studio.url, 2_000, 8))
                thread_cpu.append((studio.cpu_s() - before) / 2_000 * 1000)
                one = statistics.median(sequential(gateway.url, None, 20))
                p50 = statistics.median(burst(gateway.url, 32))
                first.append(p50)
                ratio.append(p50 / one)
        finally:
            studio.stop()
            gateway.stop()
    for label, values in (("save-messages, 10k in batches of 500, msgs/s", msgs),
                          ("  studio CPU per batch of 500, ms", batch_cpu),
                          ("POST /memory/threads, 8 clients, threads/s", threads),
                          ("  studio CPU per thread created, ms", thread_cpu),
                          ("first turn of 32 new threads at once, p50 ms", first),
                          ("  the same, vs one sequential turn, x", ratio)):
        print(f"{label:<48} median {statistics.median(values):9.2f}   runs {', '.join(f'{v:.2f}' for v in values)}")


if __name__ == "__main__":
    main()
