"""Storage: one store per domain, routed by ``CompositeStore``.

- ``libsql.LibSQLStore``: the default domain (threads, messages, resources) in SQLite.
- ``duckdb_store.DuckDBStore``: the observability domain (spans, traces, logs).
- ``conversations.ConversationStore``: the thread and message queries on the default store.
"""

from dev_server.storage.errors import StorageError

__all__ = ["StorageError"]
