-- Every turn reads the thread's active Observational Memory record, and most turns find its
-- large values as the last turn left them: the log, the buffered chunks and the buffered
-- reflection (together a few hundred kilobytes on a long thread), the observed ids, the
-- config and the metadata. content_rev counts the changes of those columns, so that a reader
-- holding a copy asks for them only when they changed (dev_server.storage.om_records).
-- A trigger bumps it: every writer of the table (another process, a libsql server's other
-- clients, a hand-run UPDATE) keeps it true without knowing about it. A column named in an
-- UPDATE's SET counts as a change even when its value stays the same: a needless re-read,
-- never a stale one. A new generation is a new row: its own id, its own count.

ALTER TABLE mastra_observational_memory ADD COLUMN content_rev INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER om_record_content_rev AFTER UPDATE OF active_observations, observed_message_ids,
    buffered_observation_chunks, buffered_reflection, config, metadata ON mastra_observational_memory
BEGIN
    UPDATE mastra_observational_memory SET content_rev = OLD.content_rev + 1 WHERE id = NEW.id;
END;
