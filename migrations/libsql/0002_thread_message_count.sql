-- Each thread keeps its message count, so "total" in a message page is one row read
-- instead of counting the thread's index (9 ms at 100,000 messages). Triggers keep it
-- exact on every insert and delete, and they also move updated_at on insert.

ALTER TABLE threads ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;

UPDATE threads SET message_count = (SELECT count(*) FROM messages WHERE messages.thread_id = threads.id);

DROP TRIGGER messages_touch_thread;

CREATE TRIGGER messages_added AFTER INSERT ON messages
BEGIN
    UPDATE threads
       SET message_count = message_count + 1,
           updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
     WHERE id = NEW.thread_id;
END;

CREATE TRIGGER messages_removed AFTER DELETE ON messages
BEGIN
    UPDATE threads SET message_count = message_count - 1 WHERE id = OLD.thread_id;
END;

CREATE TRIGGER messages_moved AFTER UPDATE OF thread_id ON messages
BEGIN
    UPDATE threads SET message_count = message_count - 1 WHERE id = OLD.thread_id;
    UPDATE threads SET message_count = message_count + 1 WHERE id = NEW.thread_id;
END;
