"""The columns of the observability tables (migrations/duckdb), in the order rows are
written: what the OTLP mapping builds its row tuples in and the writer appends (a span row
with its ``span_key`` after them). No DuckDB import, so a process that only maps spans does
not load it.
"""

import hashlib

SPAN_COLUMNS = ("trace_id", "span_id", "parent_span_id", "name", "span_type", "is_event", "status", "started_at",
                "ended_at", "entity_type", "entity_id", "entity_name", "run_id", "thread_id", "resource_id",
                "user_id", "environment", "service_name", "attributes", "metadata", "input", "output", "error",
                "tags", "links", "created_at", "updated_at")
TRACE_COLUMNS = ("trace_id", "root_span_id", "name", "status", "started_at", "ended_at", "entity_type", "entity_id",
                 "entity_name", "thread_id", "resource_id", "run_id", "environment", "service_name", "metadata",
                 "input_preview", "created_at")
LOG_COLUMNS = ("log_id", "timestamp", "level", "message", "data", "tags", "trace_id", "span_id", "entity_type",
               "entity_id", "entity_name", "thread_id", "resource_id", "run_id", "service_name", "environment",
               "metadata")


def span_key(trace_id: str, span_id: str) -> int:
    """The spans table's primary key (migration 0003): the MD5 of the two ids, as DuckDB's
    ``md5_number(trace_id || chr(31) || span_id)`` reads it (little-endian, unsigned)."""
    return int.from_bytes(hashlib.md5(f"{trace_id}\x1f{span_id}".encode()).digest(), "little")
