"""Ordered SQL migrations, one folder per engine (``migrations/libsql``, ``migrations/duckdb``).

A migration is a file ``NNNN_name.sql``; the runner applies, in version order, every file
not yet listed in the ``_migrations`` table and records it there. A shipped migration is
never edited: a schema change is a new file.

Two processes may start on a fresh database at the same moment. On SQLite the whole check
and apply runs inside one ``BEGIN IMMEDIATE`` transaction, so the second process waits on
the write lock (``busy_timeout``), then sees the versions the first one recorded and applies
nothing; a "locked" that SQLite reports at once instead of waiting is retried by the store. DuckDB has a single writer
process by design, so no lock is needed there.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from dev_server.paths import migrations_dir

_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS _migrations (
    version     INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    applied_at  TEXT NOT NULL
)
"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations(engine: str, directory: Path | None = None) -> list[Migration]:
    directory = directory or migrations_dir(engine)
    found = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILE_NAME.match(path.name)
        if not match:
            raise ValueError(f"migration file {path.name} is not named NNNN_name.sql")
        found.append(Migration(int(match[1]), match[2], path.read_text(encoding="utf-8")))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"duplicate migration versions in {directory}")
    return found


def split_sqlite_statements(sql: str) -> list[str]:
    """Split a script into complete statements (``executescript`` would commit our transaction)."""
    statements, pending = [], ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if pending.strip().strip(";").strip():
                statements.append(pending.strip())
            pending = ""
    if pending.strip() and not all(
        part.strip().startswith("--") or not part.strip() for part in pending.splitlines()
    ):
        raise ValueError("migration ends with an incomplete statement")
    return statements


def apply_libsql(conn: sqlite3.Connection, migrations: list[Migration], now: str) -> list[int]:
    """Apply pending migrations; returns the versions applied. Runs inside the caller's
    transaction (``LibSQLStore`` runs it as one ``BEGIN IMMEDIATE`` unit of work), so two
    processes opening a fresh file apply each migration once, and a failing one leaves none."""
    conn.execute(MIGRATIONS_TABLE)
    applied = {row[0] for row in conn.execute("SELECT version FROM _migrations")}
    done = []
    for migration in migrations:
        if migration.version in applied:
            continue
        for statement in split_sqlite_statements(migration.sql):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO _migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (migration.version, migration.name, now),
        )
        done.append(migration.version)
    return done


def apply_duckdb(con, migrations: list[Migration], now: str) -> list[int]:
    """Apply pending migrations on a DuckDB connection (synchronous; one writer process)."""
    con.execute(MIGRATIONS_TABLE)
    applied = {row[0] for row in con.execute("SELECT version FROM _migrations").fetchall()}
    done = []
    for migration in migrations:
        if migration.version in applied:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(migration.sql)
            con.execute(
                "INSERT INTO _migrations (version, name, applied_at) VALUES (?, ?, ?)",
                [migration.version, migration.name, now],
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        done.append(migration.version)
    return done
