"""Routes each storage domain to its store.

``default`` (threads, messages, resources: user data that cannot be rebuilt) always lives
in the LibSQL store and is opened first; a failure there stops the process. Every other
domain (today only ``observability``: derived data) is opened after it, and a failure
there is recorded and reported instead of stopping the process: the studio still serves
conversations when its DuckDB file is locked or corrupt.

The gateway does not own the observability domain (DuckDB allows one process per file);
its spans go to the studio over OTLP, so its composite lists the domain as remote.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from dev_server.storage.errors import StorageError
from dev_server.storage.group_commit import DEFAULT_MAX_GROUP
from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.remote import REMOTE_PREFIXES, RemoteLibSQLStore

log = logging.getLogger(__name__)

DEFAULT = "default"
OBSERVABILITY = "observability"


class Store(Protocol):
    url: str

    @property
    def is_open(self) -> bool: ...

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    def health(self) -> dict[str, Any]: ...


class DomainUnavailable(StorageError):
    def __init__(self, domain: str, cause: str) -> None:
        super().__init__(f"{domain} storage is unavailable: {cause}")
        self.domain = domain
        self.cause = cause


class CompositeStore:
    def __init__(
        self,
        default: LibSQLStore,
        domains: dict[str, Store] | None = None,
        *,
        remote: dict[str, str] | None = None,
    ) -> None:
        self.default = default
        self.domains: dict[str, Store] = dict(domains or {})
        self.remote = dict(remote or {})  # domain -> url of a store another process owns
        self.failures: dict[str, str] = {}
        self._opened = False

    @classmethod
    def for_role(
        cls,
        role: str,
        *,
        default_db_url: str,
        observability_db_url: str,
        busy_timeout_ms: int = 5000,
        observability_domain: Store | None = None,
        db_auth_token: str | None = None,
        db_timeout_s: float = 10.0,
        write_group: int = DEFAULT_MAX_GROUP,
        observability_memory_mb: int | None = None,
    ) -> CompositeStore:
        """The stores one process opens: the studio owns the observability file, the
        gateway only knows where it is (plain values: storage does not read settings).
        The default domain is the embedded file, or a libsql server for an http(s)/libsql URL."""
        default: Any
        if default_db_url.startswith(REMOTE_PREFIXES):
            default = RemoteLibSQLStore(default_db_url, auth_token=db_auth_token, busy_timeout_ms=busy_timeout_ms,
                                        timeout_s=db_timeout_s, max_group=write_group)
        else:
            default = LibSQLStore(default_db_url, busy_timeout_ms=busy_timeout_ms, max_group=write_group)
        if role != "studio":
            return cls(default, remote={OBSERVABILITY: observability_db_url})
        if observability_domain is None:
            from dev_server.storage.duckdb_store import DuckDBStore

            observability_domain = DuckDBStore(observability_db_url, memory_mb=observability_memory_mb)
        return cls(default, {OBSERVABILITY: observability_domain})

    def domain(self, name: str) -> Any:
        if name == DEFAULT:
            return self.default
        if name in self.failures:
            raise DomainUnavailable(name, self.failures[name])
        if name not in self.domains:
            raise DomainUnavailable(name, "not served by this process")
        return self.domains[name]

    def has(self, name: str) -> bool:
        return name == DEFAULT or (name in self.domains and name not in self.failures)

    async def open(self) -> None:
        """Open every store once; a second call (CLI pre-flight, then lifespan) does nothing."""
        if self._opened:
            return
        await self.default.open()
        for name, store in self.domains.items():
            try:
                await store.open()
                self.failures.pop(name, None)
            except StorageError as exc:
                self.failures[name] = str(exc)
                log.error("%s storage disabled: %s", name, exc)
        self._opened = True

    async def close(self) -> None:
        self._opened = False
        for store in reversed(list(self.domains.values())):
            await store.close()
        await self.default.close()

    def health(self) -> dict[str, Any]:
        report: dict[str, Any] = {DEFAULT: self.default.health()}
        for name, store in self.domains.items():
            report[name] = store.health() | ({"error": self.failures[name]} if name in self.failures else {})
        for name, url in self.remote.items():
            report[name] = {"url": url, "open": False, "owner": "studio"}
        return report
