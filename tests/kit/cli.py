"""``python -m dev_server`` as a command: run to its end, and the one-line error a bad start gives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import REPO


def run_cli(args: list[str], env: dict[str, str], cwd: Path | str = REPO, timeout: float = 30
            ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dev_server", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def assert_one_error_line(result: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit code 2, no traceback, exactly one ``error:`` line, naming every fragment."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0]
