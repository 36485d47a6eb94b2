"""``python -m app`` under tracemalloc, for ``bench/workload.py --trace-memory``.

Each SIGUSR1 writes a snapshot (after a full GC, so only live memory counts) to
``$BENCH_TRACE_OUT.<n>``, written aside and renamed so a reader never sees half a file.
Tracing slows the server several times: its figures are for finding growth, not speed.
Run: ``python bench/traced.py gateway|studio --port N`` (the arguments of ``python -m app``).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_taken = 0


def _dump(*_: object) -> None:
    global _taken
    gc.collect()
    path = f"{os.environ['BENCH_TRACE_OUT']}.{_taken}"
    _taken += 1
    tracemalloc.take_snapshot().dump(path + ".part")
    os.rename(path + ".part", path)


if __name__ == "__main__":
    tracemalloc.start(int(os.environ.get("BENCH_TRACE_FRAMES", "12")))
    signal.signal(signal.SIGUSR1, _dump)
    from app.__main__ import main

    sys.exit(main(sys.argv[1:]))
