-- Idempotent ingest: a sender that retries a batch whose acknowledgement was lost must
-- store it once. Each table gets its natural key:
--   spans  (trace_id, span_id)   OTLP's identity of a span
--   traces (trace_id)            the one row derived from a trace's root span
--   logs   (log_id)              log.record.uid when the sender gives one, else a digest of
--                                the record (dev_server.observability.otlp_mapping.log_id)
-- Rows already stored more than once are folded first (the latest copy wins). DuckDB checks
-- a new key against rows deleted in the same transaction, so each table is rebuilt with its
-- key instead of altered in place; the columns are those of 0001, unchanged.

CREATE TABLE spans_keyed (
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
    PRIMARY KEY (trace_id, span_id)
);
INSERT INTO spans_keyed
    SELECT * FROM spans QUALIFY row_number() OVER (PARTITION BY trace_id, span_id ORDER BY updated_at DESC) = 1;
DROP TABLE spans;
ALTER TABLE spans_keyed RENAME TO spans;

CREATE TABLE traces_keyed (
    trace_id        VARCHAR NOT NULL,
    root_span_id    VARCHAR NOT NULL,
    name            VARCHAR NOT NULL,
    status          VARCHAR NOT NULL,
    started_at      TIMESTAMPTZ NOT NULL,
    ended_at        TIMESTAMPTZ,
    entity_type     VARCHAR,
    entity_id       VARCHAR,
    entity_name     VARCHAR,
    thread_id       VARCHAR,
    resource_id     VARCHAR,
    run_id          VARCHAR,
    environment     VARCHAR,
    service_name    VARCHAR,
    metadata        JSON,
    input_preview   VARCHAR,
    created_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (trace_id)
);
INSERT INTO traces_keyed
    SELECT * FROM traces QUALIFY row_number() OVER (PARTITION BY trace_id ORDER BY created_at DESC) = 1;
DROP TABLE traces;
ALTER TABLE traces_keyed RENAME TO traces;

CREATE TABLE logs_keyed (
    log_id          VARCHAR NOT NULL,
    timestamp       TIMESTAMPTZ NOT NULL,
    level           VARCHAR NOT NULL,           -- debug | info | warn | error | fatal
    message         VARCHAR NOT NULL,
    data            JSON,
    tags            JSON,
    trace_id        VARCHAR,
    span_id         VARCHAR,
    entity_type     VARCHAR,
    entity_id       VARCHAR,
    entity_name     VARCHAR,
    thread_id       VARCHAR,
    resource_id     VARCHAR,
    run_id          VARCHAR,
    service_name    VARCHAR,
    environment     VARCHAR,
    metadata        JSON,
    PRIMARY KEY (log_id)
);
INSERT INTO logs_keyed
    SELECT * FROM logs QUALIFY row_number() OVER (PARTITION BY log_id ORDER BY timestamp DESC) = 1;
DROP TABLE logs;
ALTER TABLE logs_keyed RENAME TO logs;
