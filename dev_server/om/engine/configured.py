"""An engine as an options object configures it, built in one place for the memory and for
the standalone API: its records in the conversation database (``om_record_store``), every
model call through the options' model choice (``ModelChoiceCaller``), and every cycle
reported to the options' hooks (``HookedCycles``). A bare ``ObservationEngine`` (the
engine's own tests) has neither the choice nor the hooks.
"""

from __future__ import annotations

from typing import Any

from dev_server.kernel.clock import Clock
from dev_server.kernel.ports import ThreadMessages, WorkingMemoryDocument
from dev_server.om.engine.cycle_hooks import HookedCycles
from dev_server.om.engine.model_calls import ModelChoiceCaller
from dev_server.om.engine.observation_engine import ObservationEngine
from dev_server.om.engine.record_store import om_record_store
from dev_server.om.options.config import ObservationalMemoryOptions
from dev_server.storage.libsql import LibSQLStore


def configured_engine(options: ObservationalMemoryOptions, db: LibSQLStore, clock: Clock, *,
                      working: WorkingMemoryDocument | None = None, threads: ThreadMessages | None = None,
                      agent_id: str | None = None, memory: Any = None) -> ObservationEngine:
    """``db`` and ``clock``: the conversation store's; ``working`` and ``threads``: where the
    observer's working memory and titles go (None: nowhere, as in the standalone API);
    ``agent_id`` / ``memory``: the agent and memory it belongs to (None: the standalone API)."""
    return ObservationEngine(options, om_record_store(db, clock=clock), working=working, threads=threads,
                             ask=ModelChoiceCaller(options), hooks=HookedCycles(options.hooks), agent_id=agent_id,
                             memory=memory)
