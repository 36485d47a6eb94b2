-- Observability rows (the Studio REST contract's observability section). Hot fields are real columns; free-form
-- payloads are JSON. Everything here is derived data and may be rebuilt at any time.

CREATE TABLE spans (
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
    updated_at      TIMESTAMPTZ NOT NULL
);

-- One row per trace, written with its root span, so trace lists never scan all spans.
CREATE TABLE traces (
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
    created_at      TIMESTAMPTZ NOT NULL
);

CREATE TABLE logs (
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
    metadata        JSON
);
