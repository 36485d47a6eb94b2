def first_line(exc: BaseException) -> str:
    """An exception's first line: DuckDB and SQLite append pages of hints to theirs."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class StorageError(Exception):
    """A store cannot be opened or used; the message names the file and the cause."""


class StorageBusy(StorageError):
    """The database stayed locked by another writer for longer than the busy timeout."""
