"""Random ids (UUID version 4) drawn from a pool of the OS's random bytes.

``uuid.uuid4()`` calls ``os.urandom`` for each id, and CPython releases the GIL around that
``getrandom`` call. In the event loop's thread each release is a chance for a busy thread
(the store's writer, a reader) to take the GIL, and the loop then waits for it, up to
``sys.getswitchinterval()`` (5 ms), with every request it serves. One ``os.urandom`` per
``POOL`` ids keeps the ids as random (the same source, 122 random bits each) and the loop's
thread from giving the GIL away on each of them. A forked child starts a pool of its own, so
processes never share ids.
"""

from __future__ import annotations

import os
import threading
import uuid

POOL = 256  # ids per os.urandom call

_lock = threading.Lock()
_pool = b""
_next = 0


def _forget() -> None:
    global _pool, _next
    _pool, _next = b"", 0


os.register_at_fork(after_in_child=_forget)


def uuid4() -> uuid.UUID:
    """A random UUID (version 4), as ``uuid.uuid4()`` makes one."""
    global _pool, _next
    with _lock:
        if _next >= len(_pool):
            _pool, _next = os.urandom(16 * POOL), 0
        raw = _pool[_next:_next + 16]
        _next += 16
    return uuid.UUID(bytes=raw, version=4)
