"""``dev_server.kernel.ids``: random ids as ``uuid.uuid4()`` makes them, drawn from a pool of
the OS's random bytes (one ``os.urandom`` per pool, so the event loop's thread does not hand the
GIL away for each id), and never the same in a forked child as in its parent."""

from __future__ import annotations

import os
import threading
import uuid

from dev_server.kernel import ids


def test_ids_are_version_4_uuids_and_never_repeat_across_many_pools_and_threads():
    drawn: list[uuid.UUID] = []

    def draw() -> None:
        drawn.extend(ids.uuid4() for _ in range(ids.POOL * 3 + 7))

    workers = [threading.Thread(target=draw) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(drawn) == 4 * (ids.POOL * 3 + 7) == len(set(drawn))
    assert all(u.version == 4 and u.variant == uuid.RFC_4122 for u in drawn)
    assert len({u.int >> 64 for u in drawn}) == len(drawn)  # random in both halves, not a counter
    assert len({u.int & (2**64 - 1) for u in drawn}) == len(drawn)


def test_a_forked_child_draws_ids_of_its_own_not_its_parents_next_ones():
    ids.uuid4()  # the parent's pool holds ids not drawn yet
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: its next id, then gone
        try:
            os.write(write, ids.uuid4().bytes)
        finally:
            os._exit(0)
    os.close(write)
    from_child = uuid.UUID(bytes=os.read(read, 16))
    os.close(read)
    os.waitpid(child, 0)
    assert from_child != ids.uuid4()
