"""A message's search index entry and its vectors follow its text (migration 0015): Observational
Memory sealing the messages it hands to the background observer, and its markers appended to
the newest reply, change a message's content but not its text, so neither re-indexes it nor
queues it to be embedded again; an edit of the text does both."""

from __future__ import annotations

import pytest

from dev_server.kernel.messages import Message, Thread
from dev_server.om.engine.record_store import om_record_store
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from tests.kit.builders import minute_at, stored_text

pytestmark = pytest.mark.anyio


async def queued(db: LibSQLStore) -> list[int]:
    return [row[0] for row in await db.fetch_all("SELECT message_seq FROM embedding_queue ORDER BY message_seq")]


async def found(store: ConversationStore, text: str) -> list[str]:
    return [m.id for m, _ in await store.search_messages(text, resource_id="r", thread_id="t", limit=10)]


async def test_sealing_and_markers_keep_the_index_and_a_text_edit_renews_it(libsql: LibSQLStore) -> None:
    store, records = ConversationStore(libsql), om_record_store(libsql)
    await store.save_thread(Thread("t", "r"))
    await store.append_messages("t", [stored_text("u1", "user", "the lighthouse keeper", 1),
                                      Message("a1", "t", "r", "assistant",
                                              {"format": 2, "parts": [{"type": "text", "text": "a tide table"}]},
                                              minute_at(2))])
    await libsql.run_write(lambda conn: conn.execute("DELETE FROM embedding_queue"))

    await records.seal_messages(["u1", "a1"], 1_767_261_600_000)
    await records.add_parts_to_last_reply("t", [{"type": "data-om-buffering-end", "data": {"cycleId": "c"}}])
    sealed = {m.id: m for m in await store.messages_since("t", None)}
    assert sealed["u1"].content["metadata"]["mastra"]["sealed"] is True  # the content did change
    assert sealed["a1"].content["parts"][-1]["type"] == "data-om-buffering-end"
    assert await queued(libsql) == []  # nothing to embed again: the texts are the same
    assert await found(store, "lighthouse") == ["u1"]

    await store.replace_message(stored_text("u1", "user", "the harbour master", 1))
    edited = Message("a1", "t", "r", "assistant", {"format": 2, "parts": [{"type": "text", "text": "a map"}]},
                     minute_at(2))
    await store.replace_message(edited)
    assert len(await queued(libsql)) == 2  # a new flat text, and new text parts
    assert await found(store, "harbour") == ["u1"] and await found(store, "lighthouse") == []
