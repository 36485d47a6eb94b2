-- Rate counters shared by every process on the database (the turn rate limit,
-- DEV_SERVER_TURN_RATE_LIMIT): one row per key (a principal, or a client address without
-- auth) holding the end of its current window and the hits counted in it. A key's window
-- starts at its first hit after the previous one ended, so a key never needs more than its
-- one row; rows whose window has ended are deleted now and then by a process counting a hit.
-- Times are Unix epoch milliseconds.

CREATE TABLE rate_windows (
    key        TEXT PRIMARY KEY,
    window_end INTEGER NOT NULL,
    hits       INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX rate_windows_by_end ON rate_windows (window_end);
