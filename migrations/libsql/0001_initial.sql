-- Conversations: resources own threads, threads own messages. Timestamps are ISO-8601 UTC
-- strings with milliseconds ('2026-01-01T00:00:00.000Z'), so text order is time order.

CREATE TABLE resources (
    id              TEXT PRIMARY KEY,
    working_memory  TEXT,
    metadata        TEXT,                       -- JSON object or NULL
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);

CREATE TABLE threads (
    id              TEXT PRIMARY KEY,
    resource_id     TEXT NOT NULL,
    title           TEXT NOT NULL DEFAULT '',
    metadata        TEXT,                       -- JSON object or NULL
    working_memory  TEXT,                       -- thread-scoped working memory
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX threads_by_resource_created ON threads (resource_id, created_at);
CREATE INDEX threads_by_resource_updated ON threads (resource_id, updated_at);
CREATE INDEX threads_by_created ON threads (created_at);
CREATE INDEX threads_by_updated ON threads (updated_at);

-- seq is the insertion order; it breaks ties between messages with the same created_at
-- and makes (created_at, seq) a total order for cursor paging.
CREATE TABLE messages (
    seq             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    thread_id       TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    resource_id     TEXT NOT NULL,
    role            TEXT NOT NULL,
    type            TEXT NOT NULL DEFAULT 'text',
    content         TEXT NOT NULL,              -- JSON, Mastra content format 2
    created_at      TEXT NOT NULL
);
CREATE INDEX messages_by_thread_time ON messages (thread_id, created_at, seq);

-- A thread's updated_at moves whenever a message is added to it, in the same statement
-- as the insert (one round trip fewer per turn than a separate UPDATE).
CREATE TRIGGER messages_touch_thread AFTER INSERT ON messages
BEGIN
    UPDATE threads SET updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = NEW.thread_id;
END;
