"""The gateway's exporters import their HTTP client (requests) and protobuf lazily, each from
its own thread: the two export queues' workers and the shutdown's reachability check. The
requests package's modules import each other, and a thread importing ``requests.utils`` while
another was halfway through importing the exporter found it half-initialised (``ImportError:
cannot import name 'parse_dict_header' from partially initialized module 'requests.utils'``):
a gateway's shutdown failed so now and then. Such imports now take one lock
(``dev_server.kernel.lazy_imports``; litellm's first import too). Each case runs in a fresh
interpreter (nothing imported yet), the check starting a little after the exporter's build,
at delays around the 20-40 ms at which it failed here."""

from __future__ import annotations

import subprocess
import sys

from tests.support import REPO

RACE = """
import sys, threading, time
from dev_server.observability.telemetry import OtlpExport, accepts_connections

errors = []

def run(step, delay):
    time.sleep(delay)
    try:
        step()
    except Exception as exc:  # what the race raised
        errors.append(repr(exc))

steps = [(OtlpExport("logs", "http://127.0.0.1:9/v1/logs", None)._build, 0.0),
         (accepts_connections("http://127.0.0.1:9", timeout_s=0.1), float(sys.argv[1]))]
threads = [threading.Thread(target=run, args=step) for step in steps]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(errors)
"""


def test_the_exporters_lazy_imports_from_two_threads_never_fail() -> None:
    for delay_ms in range(0, 80, 5):
        run = subprocess.run([sys.executable, "-c", RACE, str(delay_ms / 1000)], cwd=REPO, capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == "[]", (delay_ms, run.stdout)
