-- A chat stream names the user message its turn answers (a retry finds its running reply),
-- and records when a dead stream's partial reply was rebuilt into its thread. Streams are
-- looked up by (resource, chat id): the existing chat and thread indexes narrow a lookup to
-- a handful of rows, the resource filters those.

ALTER TABLE chat_streams ADD COLUMN message_id TEXT;    -- the user message the turn answers
ALTER TABLE chat_streams ADD COLUMN salvaged_at INTEGER; -- when its reply was rebuilt from its frames

CREATE INDEX chat_streams_unsalvaged ON chat_streams (heartbeat_at) WHERE status = 'active' AND salvaged_at IS NULL;
