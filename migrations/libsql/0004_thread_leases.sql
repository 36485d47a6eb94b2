-- One row per thread while a turn runs on it: the cross-process serialisation of turns
-- (coordination between processes lives in the database: docs/architecture.md). A holder takes the row in a short BEGIN IMMEDIATE transaction,
-- renews expires_at while its reply streams and deletes the row when the reply is saved.
-- A row whose expires_at has passed belongs to a holder that died (kill -9): the next
-- turn takes it over. Times are Unix epoch milliseconds, compared as integers.

CREATE TABLE thread_leases (
    thread_id   TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
