-- The agent a thread belongs to (set when the gateway or the Studio creates a thread for an
-- agent), so an agent's thread list shows its own conversations and no other agent's even
-- when several agents file them under one resource ('ai-chat').

ALTER TABLE threads ADD COLUMN agent_id TEXT;

-- Existing threads: the agent that answered in them (every reply records its agentId).
UPDATE threads SET agent_id = (
    SELECT json_extract(m.content, '$.metadata.agentId') FROM messages m
     WHERE m.thread_id = threads.id AND m.role = 'assistant'
       AND json_extract(m.content, '$.metadata.agentId') IS NOT NULL
     ORDER BY m.seq LIMIT 1
);

CREATE INDEX threads_by_agent_resource_created ON threads (agent_id, resource_id, created_at);
