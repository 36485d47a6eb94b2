"""``make bench`` (issue 16 item 4): the workload runs against our servers and the bare
server in one run and writes a result file a user can read. Only its shape is checked, never
its times: every figure row, ours beside the bare server's where there is one, the machine
described, the bare server's bodies byte-identical to ours, and a PASS or FAIL line per target."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import REPO

FIGURES = ["sequential turn p50, fresh thread", "sequential turn p50, 10k-message thread",
           "server CPU per turn", "turns/s, 32 concurrent clients", "server cores used, 32 clients",
           "first turn of 32 new threads at once", "save-messages", "POST /memory/threads",
           "thread list page", "messages page", "RSS (PSS) after warm-up", "RSS (PSS) after run 2"]
TARGETS = ["server CPU per turn", "turns/s at 32 clients", "first-turn burst", "save-messages",
           "thread creation", "RSS after the run", "RSS flat"]


def test_the_quick_workload_writes_every_figure_and_a_verdict_per_target(tmp_path: Path):
    out = tmp_path / "result.md"
    done = subprocess.run([sys.executable, "bench/workload.py", "--quick", "--turns", "10", "--workers", "1",
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = out.read_text()
    assert "- CPU: " in text and "- commit: " in text and "load average" in text
    assert "byte-identical to ours" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| figure")]
    for figure in FIGURES:
        assert any(row.startswith(f"| {figure}") for row in rows), figure
    bare = next(row for row in rows if row.startswith("| server CPU per turn")).split("|")
    assert bare[3].strip() not in ("", "-") and bare[4].strip().endswith("x")  # the bare figure and the ratio
    verdicts = [line for line in text.splitlines() if line.startswith(("- **PASS**", "- **FAIL**"))]
    assert len(verdicts) == len(TARGETS)
    for target, line in zip(TARGETS, verdicts):
        assert target in line, (target, line)
