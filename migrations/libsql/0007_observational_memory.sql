-- Observational Memory (docs/observational-memory.md#record): one row per generation of a thread's
-- (or a resource's) observation log; the newest generation is the active one. Reflection
-- never changes an old row, it inserts the next generation, so older rows are the history.
-- Column names follow Mastra's in snake_case. The in-progress flags hold the ISO time they
-- were set (NULL = not set): a flag older than the staleness limit belongs to a process
-- that died, and the next claim takes it over (coordination between processes lives in the database: docs/architecture.md).

CREATE TABLE mastra_observational_memory (
    id                                TEXT PRIMARY KEY,
    lookup_key                        TEXT NOT NULL,      -- 'thread:<id>' or 'resource:<id>'
    scope                             TEXT NOT NULL,      -- 'thread' | 'resource'
    resource_id                       TEXT NOT NULL,
    thread_id                         TEXT,               -- NULL in resource scope
    active_observations               TEXT NOT NULL DEFAULT '',
    active_observations_pending_update TEXT,
    origin_type                       TEXT NOT NULL,      -- 'initial' | 'reflection'
    config                            TEXT NOT NULL,      -- JSON snapshot at creation
    generation_count                  INTEGER NOT NULL DEFAULT 0,
    last_observed_at                  TEXT,
    last_reflection_at                TEXT,
    pending_message_tokens            INTEGER NOT NULL DEFAULT 0,
    total_tokens_observed             INTEGER NOT NULL DEFAULT 0,
    observation_token_count           INTEGER NOT NULL DEFAULT 0,
    is_observing                      TEXT,
    is_reflecting                     TEXT,
    observed_message_ids              TEXT,               -- JSON array or NULL
    observed_timezone                 TEXT,
    buffered_observation_chunks       TEXT,               -- JSON array or NULL
    buffered_reflection               TEXT,
    buffered_reflection_tokens        INTEGER,
    buffered_reflection_input_tokens  INTEGER,
    reflected_observation_line_count  INTEGER,
    is_buffering_observation          TEXT,
    is_buffering_reflection           TEXT,
    last_buffered_at_tokens           INTEGER NOT NULL DEFAULT 0,
    last_buffered_at_time             TEXT,
    metadata                          TEXT NOT NULL DEFAULT '{}',
    created_at                        TEXT NOT NULL,
    updated_at                        TEXT NOT NULL
);
CREATE UNIQUE INDEX observational_memory_generations ON mastra_observational_memory (lookup_key, generation_count);
