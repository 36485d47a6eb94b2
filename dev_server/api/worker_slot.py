"""Which of the gateway's worker processes this one is, as ``/health`` reports it.

A plain value the entry point (``dev_server.workers``) hands to the factory; the factory and
the routes only read it, so it lives at the HTTP edge rather than beside the supervisor.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

STUDIO_NOTE = "the studio is always one process: it alone opens the DuckDB file"


@dataclass(frozen=True)
class WorkerSlot:
    """One of ``count`` processes serving the role; ``supervisor_pid`` is the supervisor's
    (None for a single process, which has none). Workers have no fixed index: the supervisor
    replaces one that dies with a new process, so a worker is known by its pid."""

    count: int = 1
    supervisor_pid: int | None = None

    def report(self, role: str) -> dict[str, Any]:
        """What ``/health`` says under ``worker``."""
        report: dict[str, Any] = {"pid": os.getpid(), "count": self.count}
        if self.supervisor_pid is not None:
            report["supervisorPid"] = self.supervisor_pid
        if role == "studio":
            report["note"] = STUDIO_NOTE
        return report
