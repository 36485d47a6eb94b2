"""Issue 31, item 1 and 2: a turn's OM work follows what changed, and stored markers stay small.

Through a gateway in this process (real uvicorn, a real SQLite file), the scripted model at
the provider seam, a clock that moves 1 ms per read:

* the turn's window is read incrementally (``ConversationStore.window_since``, token counts
  carried from turn to turn), and the same conversation run with a whole read at every turn
  makes the same decisions: the same statuses, observations and reflections, the same
  model requests, also when another connection to the database (another worker, a replica,
  the Studio) adds and changes messages of the thread between turns;
* a synchronous observation's ``data-om-observation-end`` streams the whole observations
  text, and its stored copy keeps only the first ``STORED_OBSERVATIONS_CHARS`` of it
  (docs/observational-memory.md, D48).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dev_server.agents import chat_agent
from dev_server.agents.definition import AgentDefinition
from dev_server.kernel.clock import ManualClock
from dev_server.kernel.messages import Message
from dev_server.llm.scripted import ScriptedModel
from dev_server.memory.options import MemoryOptions
from dev_server.om.engine.parts import STORED_OBSERVATIONS_CHARS
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from tests.kit.chat import turn
from tests.kit.om import FACT, record_row, settled, stored_messages
from tests.kit.servers import InProcessServer, serve

THREAD = "window"
IDS = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|ombuf-\S+|\b[0-9a-f]{32}\b")
# milliseconds left out: background work (a title) reads the shared clock too, at its own pace
MILLIS = re.compile(r"(T\d\d:\d\d:\d\d)\.\d{3}Z|\"durationMs\": \d+")


def plain(text: str) -> str:
    return MILLIS.sub(lambda m: m.group(1) or "", IDS.sub("<id>", text))


def agent(options: dict[str, Any]) -> AgentDefinition:
    return dataclasses.replace(chat_agent.definition, tools=(),
                               memory=lambda: MemoryOptions(observational_memory=options))


@contextmanager
def gateway(data: Path, options: dict[str, Any], llm: ScriptedModel) -> Iterator[tuple[InProcessServer, ManualClock]]:
    clock = ManualClock("2026-01-05T09:00:00.000Z", tick=timedelta(milliseconds=1))
    with serve("gateway", data, inprocess=True, settings={"telemetry": False, "om_agents": ""}, llm=llm,
               agents=(agent(options),), clock=clock) as server:
        yield server, clock


def elsewhere(db: Path, clock: ManualClock, index: int) -> None:
    """What another process does to the thread between two turns: it adds a part to the
    newest reply, edits the newest user message (which the turn before read) and appends a
    user message (as the Studio's save-messages does)."""
    async def write() -> None:
        store = LibSQLStore(f"file:{db}")
        await store.open()
        try:
            other = ConversationStore(store)
            stored = await other.messages_since(THREAD, None)
            await other.add_parts_to_last_reply(THREAD, [{"type": "data-note", "data": {"from": "elsewhere"}}])
            asked = next(m for m in reversed(stored) if m.role == "user")  # read by the turn before
            edited = {**asked.content, "parts": [*asked.content["parts"], {"type": "text", "text": " (edited)"}]}
            await other.replace_message(dataclasses.replace(asked, content=edited))
            text = f"Saved from another worker ({index}): {FACT}"
            await other.append_messages(THREAD, [Message(f"elsewhere-{index}", THREAD, stored[0].resource_id, "user", {
                "format": 2, "parts": [{"type": "text", "text": text}], "content": text},
                clock.now().isoformat(timespec="milliseconds").replace("+00:00", "Z"))])
        finally:
            await store.close()

    asyncio.run(write())


def conversation(data: Path) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """Nine turns, another process writing between some of them: what each turn streamed of
    OM (ids left out), what the model was sent, and the record at the end."""
    options = {"observation": {"messageTokens": 400, "bufferTokens": False},
               "reflection": {"observationTokens": 200}}
    llm = ScriptedModel([f"Noted, point {i}." for i in range(9)])
    streamed = []
    with gateway(data, options, llm) as (server, clock):
        for i in range(9):
            clock.advance(minutes=1)
            if i in (3, 5, 6):
                elsewhere(data / "dev-server.db", clock, i)
            result = turn(server, THREAD, f"u{i}", f"Point {i}. {FACT}")
            settled(data / "dev-server.db", THREAD)
            streamed.append([(c["type"], plain(json.dumps(c.get("data"), sort_keys=True)))
                             for c in result["chunks"] if c["type"].startswith("data-om-")])
    record = record_row(data / "dev-server.db", THREAD)
    kept = {k: plain(str(record[k])) for k in ("generation_count", "observation_token_count", "active_observations",
                                               "last_observed_at", "pending_message_tokens")}
    sent = [plain(json.dumps(r.messages, sort_keys=True)) for r in llm.requests]
    return streamed, sent, kept


def test_an_incremental_window_decides_as_a_whole_read_also_when_another_process_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    incremental = conversation(tmp_path / "incremental")

    async def whole(self: ConversationStore, thread_id: str, since: str | None) -> tuple[list[Message], dict]:
        return await self.messages_since(thread_id, since), {}

    monkeypatch.setattr(ConversationStore, "window_since", whole)
    reread = conversation(tmp_path / "whole")
    streamed, sent, record = incremental
    assert int(record["generation_count"]) >= 1  # observed and reflected on the way
    assert any(kind == "data-om-observation-end" for turn_parts in streamed for kind, _ in turn_parts)
    assert streamed == reread[0]
    assert sent == reread[1]
    assert record == reread[2]


def test_a_stored_observation_marker_keeps_a_bounded_share_of_a_long_observations_text(tmp_path: Path) -> None:
    lines = "\n".join(f"* 🔴 (09:{i % 60:02d}) User listed item {i}: a {i * 7}-page report on topic {i * 13}."
                      for i in range(600))
    observed = f"<observations>\nDate: Jan 5, 2026\n{lines}\n</observations>"
    llm = ScriptedModel(["Noted."] * 3, observer=[observed])
    with gateway(tmp_path, {"observation": {"messageTokens": 120, "bufferTokens": False}}, llm) as (server, clock):
        results = [turn(server, THREAD, f"u{i}", f"Point {i}. {FACT}") for i in range(3)]
    [streamed] = [c["data"] for r in results for c in r["chunks"] if c["type"] == "data-om-observation-end"]
    assert len(streamed["observations"]) > 10 * STORED_OBSERVATIONS_CHARS  # the stream gets all of it
    [stored] = [p["data"] for m in stored_messages(tmp_path / "dev-server.db", THREAD)
                for p in m.content["parts"] if p["type"] == "data-om-observation-end"]
    assert stored["observations"] == streamed["observations"][:STORED_OBSERVATIONS_CHARS]
    assert stored["observationsOmittedChars"] == len(streamed["observations"]) - STORED_OBSERVATIONS_CHARS
    assert {k: v for k, v in stored.items() if k not in ("observations", "observationsOmittedChars")} == {
        k: v for k, v in streamed.items() if k != "observations"}
    assert "item 599" in record_row(tmp_path / "dev-server.db", THREAD)["active_observations"]  # the log has it all
