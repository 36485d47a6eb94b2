-- A message's search index entry (0003) and its vectors (0008) follow its text, not every
-- change of its content. Observational Memory seals the messages it hands to the background
-- observer (content.metadata.mastra.sealed, the last part's sealedAt) and appends its markers
-- to the newest reply as data parts: neither changes what is searched or embedded, yet each
-- re-indexed the message's text (trigram FTS) and queued it to be embedded again, a model
-- call per message. Now only a change of the flat text (content.content), or of the text
-- parts the embedder reads when there is none (dev_server.recall.text), does.
-- (0008 is run again when the vector tables are rebuilt; its CREATE TRIGGER IF NOT EXISTS
-- then keeps this definition: a trigger on messages outlives the tables it writes to.)

DROP TRIGGER messages_fts_update;

CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages
WHEN json_extract(OLD.content, '$.content') IS NOT json_extract(NEW.content, '$.content')
BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text)
        VALUES ('delete', OLD.seq, json_extract(OLD.content, '$.content'));
    INSERT INTO messages_fts (rowid, text) VALUES (NEW.seq, json_extract(NEW.content, '$.content'));
END;

DROP TRIGGER IF EXISTS embedding_queue_edited_message;

CREATE TRIGGER IF NOT EXISTS embedding_queue_edited_message AFTER UPDATE OF content ON messages
WHEN NEW.role IN ('user', 'assistant') AND NEW.content IS NOT OLD.content
 AND (json_extract(OLD.content, '$.content') IS NOT json_extract(NEW.content, '$.content')
      OR (SELECT group_concat(json_extract(value, '$.text'), char(10)) FROM json_each(OLD.content, '$.parts')
           WHERE json_extract(value, '$.type') = 'text')
         IS NOT (SELECT group_concat(json_extract(value, '$.text'), char(10)) FROM json_each(NEW.content, '$.parts')
           WHERE json_extract(value, '$.type') = 'text'))
BEGIN
    INSERT INTO embedding_queue (message_seq) VALUES (NEW.seq)
        ON CONFLICT (message_seq) DO UPDATE SET version = version + 1, attempts = 0, not_before = 0;
END;
