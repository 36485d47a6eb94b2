-- Message search: an FTS5 index over each message's flat text (content.content), kept by
-- triggers, so a search reads the index instead of scanning every row with LIKE.
-- The trigram tokenizer matches any substring of three characters or more, case-
-- insensitively, which is what the LIKE search it replaces did. It is an external-content
-- index over a view: the text is not stored twice.

CREATE VIEW message_texts AS
    SELECT seq, json_extract(content, '$.content') AS text FROM messages;

CREATE VIRTUAL TABLE messages_fts USING fts5 (
    text,
    content = 'message_texts',
    content_rowid = 'seq',
    tokenize = 'trigram'
);

INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
BEGIN
    INSERT INTO messages_fts (rowid, text) VALUES (NEW.seq, json_extract(NEW.content, '$.content'));
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text)
        VALUES ('delete', OLD.seq, json_extract(OLD.content, '$.content'));
END;

CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages
BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text)
        VALUES ('delete', OLD.seq, json_extract(OLD.content, '$.content'));
    INSERT INTO messages_fts (rowid, text) VALUES (NEW.seq, json_extract(NEW.content, '$.content'));
END;
