"""A thread's window read incrementally (``ConversationStore.window_since``) is always what a
whole read (``messages_since``) returns, whoever changed the thread in between: here a second
store on the same SQLite file, with its own connections, as another worker process or replica
writes. What changed is answered from the database (migration 0014), and only what changed
is read and decoded."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dev_server.kernel.messages import Message, Thread
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.message_window import _CHANGES
from tests.kit.builders import minute_at, stored_text

pytestmark = pytest.mark.anyio


@pytest.fixture
async def two_processes(tmp_path: Path):
    """(this process's store, another process's store) on one database file."""
    url = f"file:{tmp_path / 'store.db'}"
    mine, other = LibSQLStore(url), LibSQLStore(url)
    await mine.open()
    await other.open()
    yield ConversationStore(mine), ConversationStore(other)
    await other.close()
    await mine.close()


def view(messages: list[Message]) -> list[tuple[str, str, str, object]]:
    return [(m.id, m.role, m.created_at, m.content) for m in messages]


async def same_as_whole(store: ConversationStore, since: str | None) -> list[Message]:
    window, _ = await store.window_since("t", since)
    assert view(window) == view(await store.messages_since("t", since))
    return window


async def test_what_another_process_writes_is_read_as_it_changed(two_processes) -> None:
    mine, other = two_processes
    await mine.save_thread(Thread("t", "r"))
    await mine.append_messages("t", [stored_text(f"m{i}", "user" if i % 2 == 0 else "assistant", f"text {i}", i)
                                     for i in range(6)])
    first = await same_as_whole(mine, None)
    assert mine.windows.reads == {"whole": 1, "changes": 0}

    await other.append_messages("t", [stored_text("m6", "user", "new", 6)])  # appended elsewhere
    window = await same_as_whole(mine, None)
    assert window[0] is first[0]  # kept, not read again
    await other.add_parts_to_last_reply("t", [{"type": "data-om-buffering-end", "data": {"cycleId": "c"}}])
    await same_as_whole(mine, None)
    edited = stored_text("m2", "user", "text 2, edited", 2)
    await other.replace_message(edited)
    await same_as_whole(mine, None)
    await other.append_messages("t", [stored_text("late", "user", "stored late, sorted early", 3)])
    await same_as_whole(mine, None)
    assert mine.windows.reads == {"whole": 1, "changes": 4}  # appends and edits: only what changed was read

    await same_as_whole(mine, minute_at(3))  # the cursor moved on: the older messages leave
    await other.append_messages("t", [stored_text("old", "assistant", "before the cursor", 1)])
    await same_as_whole(mine, minute_at(3))
    assert mine.windows.reads["whole"] == 1


async def test_deletions_and_moves_elsewhere_make_it_read_the_window_whole(two_processes) -> None:
    mine, other = two_processes
    for thread in ("t", "u"):
        await mine.save_thread(Thread(thread, "r"))
    await mine.append_messages("t", [stored_text(f"m{i}", "user", f"text {i}", i) for i in range(4)])
    await same_as_whole(mine, None)

    await other.delete_messages(["m3"])  # the newest: its seq is given to the next insert
    await other.append_messages("t", [stored_text("m4", "user", "takes the freed seq", 4)])
    await same_as_whole(mine, None)
    await other.delete_after("t", "m1")
    await same_as_whole(mine, None)
    await other.save_messages([Thread("u", "r")], [Message("m1", "u", "r", "user", {"format": 2, "parts": []},
                                                           minute_at(1))])  # moved to another thread
    await same_as_whole(mine, None)
    moved_in = Message("m0", "t", "r", "user", {"format": 2, "parts": [{"type": "text", "text": "back"}]},
                       minute_at(0))
    await other.append_messages("u", [stored_text("u1", "user", "in u", 5, thread="u")])
    await other.save_messages([Thread("t", "r"), Thread("u", "r")],
                              [moved_in, Message("u1", "t", "r", "user", {"format": 2, "parts": []}, minute_at(5))])
    await same_as_whole(mine, None)
    assert mine.windows.reads["whole"] >= 4  # each removal was noticed and answered by a whole read

    await other.delete_thread("t")
    assert await mine.window_since("t", None) == ([], {})


async def test_derived_values_are_dropped_with_the_message_they_came_from(two_processes) -> None:
    mine, other = two_processes
    await mine.save_thread(Thread("t", "r"))
    await mine.append_messages("t", [stored_text("a", "user", "one", 1), stored_text("b", "assistant", "two", 2)])
    window, derived = await mine.window_since("t", None)
    derived.update({m.seq: m.id for m in window})
    await other.replace_message(stored_text("b", "assistant", "two, edited", 2))
    window, derived = await mine.window_since("t", None)
    assert derived == {window[0].seq: "a"}  # b changed: what was derived from it is gone
    window, derived = await mine.window_since("t", minute_at(2))
    assert [m.id for m in window] == ["b"] and derived == {}  # a left the window


async def test_a_look_past_the_windows_start_keeps_it_for_the_next_read_from_the_cursor(two_processes) -> None:
    """A queued observation reads from its oldest candidate, ahead of the record's cursor
    (``advance=False``); the turn after it reads from the cursor again. Moving the window
    to the candidate made that next read a whole read of the window (five in 300 turns of an
    imported thread, each decoding and counting hundreds of messages)."""
    mine, other = two_processes
    await mine.save_thread(Thread("t", "r"))
    await mine.append_messages("t", [stored_text(f"m{i}", "user", f"text {i}", i) for i in range(6)])
    await same_as_whole(mine, minute_at(1))
    await other.append_messages("t", [stored_text("m6", "user", "new", 6)])
    ahead, _ = await mine.window_since("t", minute_at(4), advance=False)
    assert view(ahead) == view(await mine.messages_since("t", minute_at(4)))
    await same_as_whole(mine, minute_at(1))
    await same_as_whole(mine, minute_at(2))  # the cursor moved: the window follows it
    assert mine.windows.reads["whole"] == 1


async def test_reading_what_changed_costs_the_same_however_many_messages_were_revised_before(
        two_processes, tmp_path: Path) -> None:
    """A reply is revised every turn (its markers), so a long thread has thousands of revised
    messages: the read of what changed seeks from the window's rev in their index, not from
    the first of them. Counted as SQLite's virtual-machine steps (a progress handler called at
    each), the same query on the same file before and after 300 more revisions."""
    mine, _ = two_processes
    await mine.save_thread(Thread("t", "r"))
    await mine.append_messages("t", [stored_text(f"m{i}", "user", f"text {i}", i) for i in range(320)])

    async def revise(first: int, count: int) -> None:
        for i in range(first, first + count):
            await mine.replace_message(stored_text(f"m{i}", "user", f"text {i}, edited", i))

    def steps_to_read_changes() -> int:
        conn = sqlite3.connect(tmp_path / "store.db")
        rev, top = conn.execute("SELECT message_rev, (SELECT max(seq) FROM messages) FROM threads").fetchone()
        steps = [0]

        def step() -> int:
            steps[0] += 1
            return 0

        conn.set_progress_handler(step, 1)
        assert conn.execute(_CHANGES, ("t", "t", "t", top, "t", rev - 1, top)).fetchall()  # the last revision's row
        conn.close()
        return steps[0]

    await revise(0, 10)
    few = steps_to_read_changes()
    await revise(10, 300)
    assert steps_to_read_changes() == few


async def test_an_edit_anywhere_in_a_long_window_replaces_its_old_copy(two_processes) -> None:
    """A turn revises its newest reply; an edit further back, of both at once, or one that moves
    a message back in time replaces its old copy all the same, without a whole read."""
    mine, other = two_processes
    await mine.save_thread(Thread("t", "r"))
    await mine.append_messages("t", [stored_text(f"m{i}", "user" if i % 2 == 0 else "assistant", f"text {i}", i)
                                     for i in range(30)])
    await same_as_whole(mine, None)
    await other.add_parts_to_last_reply("t", [{"type": "data-om-buffering-end", "data": {"cycleId": "c"}}])
    await same_as_whole(mine, None)  # the newest
    await other.replace_message(stored_text("m3", "assistant", "text 3, edited", 3))
    await same_as_whole(mine, None)  # far back
    await other.replace_message(stored_text("m29", "assistant", "text 29, edited", 29))
    await other.replace_message(stored_text("m5", "assistant", "text 5, edited", 5))
    window = await same_as_whole(mine, None)  # both at once
    await other.replace_message(stored_text("m27", "assistant", "text 27, moved back", 4))
    moved = await same_as_whole(mine, None)  # one of the newest, its time moved back
    assert len(window) == len(moved) == 30 and mine.windows.reads["whole"] == 1
