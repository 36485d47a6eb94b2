-- Semantic recall's index, beside the messages it describes, so both processes see it and
-- it lives and dies with them. Every statement is idempotent (IF NOT EXISTS): the indexer
-- runs this file again when it finds the table missing, then re-embeds from the messages.
--
-- message_vectors: one row per piece of a message's text (long texts are cut), float32
-- little-endian unit vectors (libsql's F32_BLOB layout), tagged with the embedder's key so
-- vectors of two models never meet in one query; NULL vector: nothing to embed. The id
-- only grows, and every delete leaves a tombstone, so a process's in-memory copy of the
-- vectors catches up by reading what is newer than the last id it saw.
CREATE TABLE IF NOT EXISTS message_vectors (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    message_seq INTEGER NOT NULL,
    chunk       INTEGER NOT NULL,
    thread_id   TEXT NOT NULL,
    model       TEXT NOT NULL,
    text_hash   TEXT NOT NULL,
    vector      BLOB,
    UNIQUE (message_seq, chunk)
);
CREATE INDEX IF NOT EXISTS message_vectors_by_thread ON message_vectors (thread_id, model);
CREATE INDEX IF NOT EXISTS message_vectors_by_text ON message_vectors (model, text_hash);

CREATE TABLE IF NOT EXISTS message_vector_tombstones (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    vector_id   INTEGER NOT NULL
);

-- What is still to embed: a message's seq, the version of its text (bumped by every edit,
-- so a result for an older text is not written), failed attempts, and a time before which
-- no indexer takes it (claimed by one now, or backing off after a failure).
CREATE TABLE IF NOT EXISTS embedding_queue (
    message_seq INTEGER PRIMARY KEY,
    version     INTEGER NOT NULL DEFAULT 0,
    attempts    INTEGER NOT NULL DEFAULT 0,
    not_before  REAL NOT NULL DEFAULT 0
);

CREATE TRIGGER IF NOT EXISTS embedding_queue_new_message AFTER INSERT ON messages
WHEN NEW.role IN ('user', 'assistant')
BEGIN
    INSERT INTO embedding_queue (message_seq) VALUES (NEW.seq)
        ON CONFLICT (message_seq) DO UPDATE SET version = version + 1, attempts = 0, not_before = 0;
END;

CREATE TRIGGER IF NOT EXISTS embedding_queue_edited_message AFTER UPDATE OF content ON messages
WHEN NEW.role IN ('user', 'assistant') AND NEW.content IS NOT OLD.content
BEGIN
    INSERT INTO embedding_queue (message_seq) VALUES (NEW.seq)
        ON CONFLICT (message_seq) DO UPDATE SET version = version + 1, attempts = 0, not_before = 0;
END;

-- A message moved to another thread, or a thread to another resource: its vectors are
-- dropped (tombstoned) and embedded again under their new place.
CREATE TRIGGER IF NOT EXISTS message_vectors_moved AFTER UPDATE OF thread_id ON messages
BEGIN
    DELETE FROM message_vectors WHERE message_seq = NEW.seq;
    INSERT INTO embedding_queue (message_seq) VALUES (NEW.seq)
        ON CONFLICT (message_seq) DO UPDATE SET version = version + 1, attempts = 0, not_before = 0;
END;

CREATE TRIGGER IF NOT EXISTS message_vectors_thread_transferred AFTER UPDATE OF resource_id ON threads
WHEN NEW.resource_id IS NOT OLD.resource_id
BEGIN
    INSERT INTO embedding_queue (message_seq) SELECT message_seq FROM message_vectors WHERE thread_id = NEW.id
        ON CONFLICT (message_seq) DO UPDATE SET version = version + 1, attempts = 0, not_before = 0;
    DELETE FROM message_vectors WHERE thread_id = NEW.id;
END;

CREATE TRIGGER IF NOT EXISTS message_vectors_gone AFTER DELETE ON messages
BEGIN
    DELETE FROM message_vectors WHERE message_seq = OLD.seq;
    DELETE FROM embedding_queue WHERE message_seq = OLD.seq;
END;

CREATE TRIGGER IF NOT EXISTS message_vectors_tombstone AFTER DELETE ON message_vectors
BEGIN
    INSERT INTO message_vector_tombstones (vector_id) VALUES (OLD.id);
END;

INSERT OR IGNORE INTO embedding_queue (message_seq)
    SELECT seq FROM messages WHERE role IN ('user', 'assistant');
