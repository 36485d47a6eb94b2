-- What changed in a thread's messages since a process last read them, answered from the
-- database so that every process and replica can trust what it read before
-- (dev_server.storage.message_window): a message inserted since has a higher seq; one
-- changed since (content, role, type, time, or moved into the thread) has a higher rev;
-- a deletion (or a move out of the thread) moves the thread's message_removals.
--
-- threads.message_rev counts the changes of the thread's messages; an UPDATE stamps the
-- changed row with the thread's new value. Inserts leave rev at 0 (seq tells them), so a
-- bulk import writes each row once. Both indexes answer "after this seq / rev" for one
-- thread without reading its other rows; the rev index holds only changed rows.

ALTER TABLE threads ADD COLUMN message_rev INTEGER NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN message_removals INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN rev INTEGER NOT NULL DEFAULT 0;

CREATE INDEX messages_by_thread_seq ON messages (thread_id, seq);
CREATE INDEX messages_by_thread_rev ON messages (thread_id, rev) WHERE rev > 0;

CREATE TRIGGER messages_revised AFTER UPDATE OF content, role, type, created_at ON messages
BEGIN
    UPDATE threads SET message_rev = message_rev + 1 WHERE id = NEW.thread_id;
    UPDATE messages SET rev = (SELECT message_rev FROM threads WHERE id = NEW.thread_id) WHERE seq = NEW.seq;
END;

-- The triggers of 0002 keep the message count; they now keep the removals in the same UPDATE
-- (an upsert that names the same thread again moves nothing).
DROP TRIGGER messages_removed;
DROP TRIGGER messages_moved;

CREATE TRIGGER messages_removed AFTER DELETE ON messages
BEGIN
    UPDATE threads SET message_count = message_count - 1, message_removals = message_removals + 1
     WHERE id = OLD.thread_id;
END;

CREATE TRIGGER messages_moved AFTER UPDATE OF thread_id ON messages
WHEN OLD.thread_id IS NOT NEW.thread_id
BEGIN
    UPDATE threads SET message_count = message_count - 1, message_removals = message_removals + 1
     WHERE id = OLD.thread_id;
    UPDATE threads SET message_count = message_count + 1, message_rev = message_rev + 1 WHERE id = NEW.thread_id;
    UPDATE messages SET rev = (SELECT message_rev FROM threads WHERE id = NEW.thread_id) WHERE seq = NEW.seq;
END;
