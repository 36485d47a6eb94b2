"""``make bench`` (bench/issue31.py): one report over every item of issue 31. Only its shape
is checked, never its times. A module of its own (not in test_bench.py) so that its run,
the longest of the bench smoke runs, goes to another test worker than theirs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

pytestmark = pytest.mark.slow


ISSUE31_TARGETS = ["server CPU per turn on the 10k-message thread", "thread creation at 8 in flight",
                   "a burst of 32 first turns", "last/first over 20 turns at messageTokens 30,000",
                   "last/first over 20 turns at messageTokens 100,000", "CPU per turn on a fresh thread",
                   "CPU per turn on a 1,000-message imported thread", "local observer bounded",
                   "local reflector on a", "30 observation cycles", "telemetry's share",
                   "studio: RSS after start", "gateway x2: status ok", "thread creation at 8 in flight in the store",
                   "embedded recall@10", "recall@10 of libsql's vector index on sqld"]
ISSUE31_SECTIONS = ["Workload with Observational Memory off and on", "Observational Memory on a long thread",
                    "The local observer and reflector", "Telemetry's share", "Footprint and start-up",
                    "Write batching", "Semantic recall, the embedded scan"]


def test_the_issue31_report_holds_every_item_with_a_verdict_and_om_on_against_off(tmp_path: Path):
    """``make bench`` (bench/issue31.py), its smallest run: one report with the machine and the
    load at start and end, a verdict line per target of issue 31 (N/A where Mastra's figure is
    needed, INFO for the telemetry share), the workload with OM off and on beside the bare
    server with their ratios, and each part's table."""
    out = tmp_path / "issue31.md"
    done = subprocess.run([sys.executable, "bench/issue31.py", "--smoke", "--workers", "1", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = out.read_text()
    assert "- CPU: " in text and "- commit: " in text and "load average (1, 5, 15 min) at start: " in text
    assert "; at end: " in text and "smoke run" in text
    targets = text.split("## Targets (issue 31)")[1].split("\n## ")[0]
    verdicts = [line for line in targets.splitlines() if line.startswith("- **")]
    assert all(line.split("**")[1] in ("PASS", "FAIL", "N/A", "INFO") for line in verdicts)
    for target in ISSUE31_TARGETS:
        assert any(target in line for line in verdicts), target
    assert sum("Mastra" in line for line in verdicts if line.startswith("- **N/A**")) == 2
    for section in ISSUE31_SECTIONS:
        assert f"\n## {section}" in text, section
    header = "| figure | OM off | OM on | bare server | on / off | off / bare | on / bare |"
    rows = [line.split("|")[1:-1] for line in text.split(header)[1].split("\n\n")[0].splitlines()[2:]]
    cpu = next(row for row in rows if row[0].strip().startswith("server CPU per turn (10k thread, sequential"))
    assert all(cell.strip().endswith("x") for cell in cpu[4:])
    assert any(row[0].strip().startswith("save-messages") and row[3].strip() == "-" for row in rows)
    assert text.count("- CPU: ") == 1  # the parts' machine lines are the header's
