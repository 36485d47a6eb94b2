class StorageError(Exception):
    """A store cannot be opened or used; the message names the file and the cause."""


class StorageBusy(StorageError):
    """The database stayed locked by another writer for longer than the busy timeout."""
