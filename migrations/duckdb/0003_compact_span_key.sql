-- A span's key in 16 bytes. Its identity stays (trace_id, span_id), but the primary-key index
-- (ART) that enforces it is held in memory whole and grows with every span stored: on the two
-- strings (32 + 16 hex characters) it took ~100 bytes a span, on one UHUGEINT ~40. So the key
-- is span_key, the MD5 of trace_id || chr(31) || span_id read as an unsigned 128-bit integer
-- (DuckDB's md5_number; the writer computes the same in Python, storage.observability.writer).
-- Two spans share a key only if their ids collide in MD5: never by chance. The table is
-- rebuilt (DuckDB cannot drop a primary key in place); the columns of 0002 come first, unchanged.

CREATE TABLE spans_compact (
    trace_id        VARCHAR NOT NULL,
    span_id         VARCHAR NOT NULL,
    parent_span_id  VARCHAR,
    name            VARCHAR NOT NULL,
    span_type       VARCHAR NOT NULL,
    is_event        BOOLEAN NOT NULL DEFAULT false,
    status          VARCHAR NOT NULL,           -- success | error | running
    started_at      TIMESTAMPTZ NOT NULL,
    ended_at        TIMESTAMPTZ,
    entity_type     VARCHAR,
    entity_id       VARCHAR,
    entity_name     VARCHAR,
    run_id          VARCHAR,
    thread_id       VARCHAR,
    resource_id     VARCHAR,
    user_id         VARCHAR,
    environment     VARCHAR,
    service_name    VARCHAR,
    source          VARCHAR,
    attributes      JSON,
    metadata        JSON,
    input           JSON,
    output          JSON,
    error           JSON,
    tags            JSON,
    links           JSON,
    request_context JSON,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    span_key        UHUGEINT NOT NULL PRIMARY KEY  -- md5_number(trace_id || chr(31) || span_id)
);
INSERT INTO spans_compact SELECT *, md5_number(trace_id || chr(31) || span_id) FROM spans;
DROP TABLE spans;
ALTER TABLE spans_compact RENAME TO spans;
