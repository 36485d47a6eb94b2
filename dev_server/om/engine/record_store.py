"""The OM record store as Observational Memory uses it: the storage layer's ``OMRecordStore``
handed OM's rules for the log it keeps (``LOG_RULES``: the message boundary of
``dev_server.om.prompting.context`` and tokenx's count).
"""

from __future__ import annotations

from dev_server.kernel.clock import SYSTEM_CLOCK, Clock
from dev_server.kernel.tokenx import estimate_tokens
from dev_server.om.prompting.context import message_boundary
from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.om_records import LogRules, OMRecordStore

LOG_RULES = LogRules(boundary=message_boundary, count_tokens=estimate_tokens)


def om_record_store(db: LibSQLStore, *, clock: Clock = SYSTEM_CLOCK) -> OMRecordStore:
    """The records of ``db`` (the default store's database), written by OM's rules and
    stamped by ``clock`` (the conversation store's)."""
    return OMRecordStore(db, LOG_RULES, clock=clock)
