-- The chunks of each gateway chat stream while it runs, so a client that reloads (or whose
-- replica died) can resume it on any process: GET /api/chat/{chatId}/stream. One row per
-- stream in chat_streams; its SSE frames in stream_chunks by their SSE id (seq). The
-- producer renews heartbeat_at while it runs; a stream whose heartbeat stopped is dead.
-- Finished and dead streams are deleted (chunks with them) after a short retention.
-- Times are Unix epoch milliseconds.

CREATE TABLE chat_streams (
    stream_id    TEXT PRIMARY KEY,
    chat_id      TEXT,              -- useChat's chat id, when the request named one
    thread_id    TEXT,              -- the thread (conversationId), for a turn with memory
    agent_id     TEXT NOT NULL,
    resource_id  TEXT NOT NULL,
    status       TEXT NOT NULL,     -- 'active' | 'finished'
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    finished_at  INTEGER
);
CREATE INDEX chat_streams_by_chat ON chat_streams (chat_id, started_at);
CREATE INDEX chat_streams_by_thread ON chat_streams (thread_id, started_at);

CREATE TABLE stream_chunks (
    stream_id TEXT NOT NULL REFERENCES chat_streams (stream_id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,    -- the frame's SSE id
    data      TEXT NOT NULL,       -- the frame's data: one JSON chunk, or [DONE]
    PRIMARY KEY (stream_id, seq)
) WITHOUT ROWID;
