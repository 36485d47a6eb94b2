-- A stored reply holds a step-start part only between two steps, as Mastra stores it: none
-- before the first step (the stream still sends start-step for every step). Replies stored
-- before this kept one at the head of the first step (after any data-* part written before
-- the model answered); it is removed here, so what is stored, shown and counted (OM token
-- estimates) is what Mastra has. Rows whose content is not valid JSON are left alone.

CREATE VIEW reply_first_step_starts AS
    SELECT m.seq AS seq, min(p.key) AS part
    FROM messages AS m,
         json_each(CASE WHEN json_valid(m.content) THEN m.content ELSE '{}' END, '$.parts') AS p
    WHERE m.role = 'assistant'
      AND CASE WHEN p.type = 'object' THEN json_extract(p.value, '$.type') END = 'step-start'
    GROUP BY m.seq;

UPDATE messages
SET content = json_remove(content, '$.parts[' || (
        SELECT min(p.key) FROM json_each(messages.content, '$.parts') AS p
        WHERE CASE WHEN p.type = 'object' THEN json_extract(p.value, '$.type') END = 'step-start') || ']')
WHERE seq IN (
    SELECT f.seq FROM reply_first_step_starts AS f
    WHERE NOT EXISTS (
        SELECT 1 FROM messages AS m,
             json_each(CASE WHEN json_valid(m.content) THEN m.content ELSE '{}' END, '$.parts') AS b
        WHERE m.seq = f.seq AND b.key < f.part
          AND coalesce(CASE WHEN b.type = 'object' THEN json_extract(b.value, '$.type') END, '')
              NOT LIKE 'data-%'));

DROP VIEW reply_first_step_starts;
