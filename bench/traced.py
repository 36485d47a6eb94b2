"""``python -m dev_server`` under tracemalloc, for ``bench/workload.py --trace-memory``.

The first SIGUSR1 starts tracing (so start-up, litellm's import above all, runs at full
speed: under tracemalloc it takes minutes); each SIGUSR1 then writes a snapshot (after a
full GC, so only live memory counts) to ``$BENCH_TRACE_OUT.<n>``, written aside and renamed
so a reader never sees half a file, and beside it ``<that>.peak``: the traced memory now and
its peak since the snapshot before, in bytes (a peak that climbs while what stays alive does
not is a working set that grows, not a leak). Snapshot 0 is taken as tracing starts, so a later one
holds exactly what was allocated since and is still alive. Tracing slows the server several
times: its figures are for finding growth, not speed.
Run: ``python bench/traced.py gateway|studio --port N`` (the arguments of ``python -m dev_server``).
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
    if not tracemalloc.is_tracing():
        tracemalloc.start(int(os.environ.get("BENCH_TRACE_FRAMES", "8")))
    path = f"{os.environ['BENCH_TRACE_OUT']}.{_taken}"
    _taken += 1
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    Path(path + ".peak").write_text(f"{current} {peak}\n")
    tracemalloc.take_snapshot().dump(path + ".part")
    os.rename(path + ".part", path)


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _dump)
    from dev_server.__main__ import main

    sys.exit(main(sys.argv[1:]))
