"""Scale-out (issue 15, items 1, 2 and the faults): two gateway replicas and the studio,
real ``python -m dev_server`` processes, on one real libsql server (sqld). Chat through the real
``ai`` package alternating between replicas, the studio judged by the real
``@mastra/client-js``, ownership with auth on, and sqld restarted or frozen under load."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dev_server.settings import Settings
from dev_server.storage.migrate import load_migrations
from tests.kit.builders import ui_message
from tests.kit.chat import chat_turn, post_chat, recorded_through, reply_text, resume, streamed_text
from tests.kit.local_http import local_http
from tests.kit.servers import ProcessServer, make_server, serve
from tests.sqld import Sqld
from tests.support import frames_of, run_node, ui_chunks, user_message, wait_models_ready

pytestmark = pytest.mark.e2e


class Topology:
    def __init__(self, root: Path) -> None:
        self.sqld = Sqld(root / "sqld").start()
        self.studio = make_server("studio", root / "studio", env={"DEV_SERVER_DB_URL": self.sqld.url})
        self.studio.start()
        self.studio.wait_healthy(timeout=60)
        self.gateways = [make_server("gateway", root / f"gateway-{i}", env={
            "DEV_SERVER_DB_URL": self.sqld.url, "DEV_SERVER_DB_TIMEOUT_S": "3",
            "DEV_SERVER_STUDIO_URL": self.studio.url}) for i in (1, 2)]
        for gateway in self.gateways:  # both at once: migrations must be safe when replicas start together
            gateway.start()
        for gateway in self.gateways:
            gateway.wait_healthy(timeout=60)

    def stop(self) -> None:
        for server in (*self.gateways, self.studio):
            server.stop()
        self.sqld.stop()


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    running = Topology(tmp_path_factory.mktemp("scale-out"))
    try:
        yield running
    finally:
        running.stop()


def chat(gateway: ProcessServer, thread: str, message_id: str, text: str) -> dict[str, Any]:
    return chat_turn(gateway, [user_message(message_id, text)], body={"conversationId": thread}, chat_id=thread)


def test_replicas_share_one_database_and_the_migrations_ran_once(topology: Topology) -> None:
    versions = topology.sqld.rows("SELECT version FROM _migrations ORDER BY version")
    assert ([v for (v,) in versions] == sorted({v for (v,) in versions})
            and len(versions) == len(load_migrations("libsql")))
    for server in (*topology.gateways, topology.studio):
        health = local_http.get(f"{server.url}/health").json()
        assert health["stores"]["default"]["url"] == topology.sqld.url, health["stores"]


def test_a_conversation_alternating_between_replicas_keeps_its_memory(topology: Topology) -> None:
    a, b = topology.gateways
    texts = ["my name is Ada", "I live in Lisbon", "I have two cats", "what is my name?"]
    results = [chat((a, b)[i % 2], "alt", f"alt-{i}", text) for i, text in enumerate(texts)]
    assert all(r["ok"] for r in results), [r.get("error") for r in results]
    assert "Ada" in reply_text(results[-1])  # asked on replica b, told to replica a
    rows = topology.sqld.rows("SELECT id, role FROM messages WHERE thread_id = 'alt' ORDER BY created_at, seq")
    assert [r[1] for r in rows] == ["user", "assistant"] * 4  # no duplicate, none lost
    assert [r[0] for r in rows][::2] == [f"alt-{i}" for i in range(4)]
    listed = local_http.get(f"{topology.studio.url}/api/memory/threads/alt/messages",
                       params={"agentId": "chat-agent"}).json()
    assert len(listed["messages"]) == 8


def test_concurrent_turns_on_both_replicas_lose_nothing(topology: Topology) -> None:
    a, b = topology.gateways
    jobs = [((a, b)[i % 2], f"many-{i % 4}", f"m-{i}", f"note number {i}") for i in range(16)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda job: chat(*job), jobs))
    assert all(r["ok"] for r in results), [r.get("error") for r in results if not r["ok"]]
    rows = topology.sqld.rows("SELECT id, role FROM messages WHERE thread_id LIKE 'many-%'")
    assert len(rows) == 32 and len({r[0] for r in rows}) == 32
    assert {r[0] for r in rows if r[1] == "user"} == {f"m-{i}" for i in range(16)}


def test_the_studio_on_the_server_passes_client_js(topology: Topology) -> None:
    out = run_node("client_conformance.mjs", {"baseUrl": topology.studio.url}, timeout=240)
    failed = {r["name"]: r["error"] for r in out["results"] if not r["ok"]}
    assert not failed and len(out["results"]) > 10


def test_ownership_holds_across_replicas(tmp_path: Path) -> None:
    with Sqld(tmp_path / "sqld") as sqld:
        settings = Settings(data_dir=tmp_path, db_url=sqld.url, auth_tokens="ta=alice,tb=bob", telemetry=False)
        with serve("gateway", tmp_path, inprocess=True, settings=settings) as one, \
                serve("gateway", tmp_path, inprocess=True, settings=settings) as two:
            alice, bob = {"authorization": "Bearer ta"}, {"authorization": "Bearer tb"}
            hers = {"body": {"conversationId": "hers"}, "chat_id": "hers"}
            assert chat_turn(one, [user_message("a1", "my secret is 42")], headers=alice, **hers)["ok"]
            stolen = chat_turn(two, [user_message("b1", "what is the secret?")], headers=bob, **hers)
            assert not stolen["ok"]
            assert [r[0] for r in sqld.rows("SELECT id FROM messages WHERE thread_id = 'hers'")][0] == "a1"
            assert "b1" not in {r[0] for r in sqld.rows("SELECT id FROM messages")}
            assert sqld.rows("SELECT resource_id FROM threads WHERE id = 'hers'") == [("user:alice",)]


def test_sqld_restarted_mid_load_fails_cleanly_then_recovers(topology: Topology) -> None:
    a, b = topology.gateways
    errors: list[tuple[int, str]] = []

    def load(i: int) -> None:
        gateway = (a, b)[i % 2]
        response = local_http.post(f"{gateway.url}/api/chat", timeout=30, json={
            "id": f"restart-{i}", "messages": [user_message(f"r-{i}", f"message {i}")],
            "conversationId": f"restart-{i % 3}", "trigger": "submit-message"})
        if response.status_code != 200:
            errors.append((response.status_code, response.text))
            assert response.status_code in (409, 503) and response.json()["error"], response.text

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(load, i) for i in range(12)]
        time.sleep(0.3)
        topology.sqld.stop()
        time.sleep(0.5)
        topology.sqld.start()
        for future in futures:
            future.result()
    # later turns succeed on both replicas
    for gateway in (a, b):
        assert chat(gateway, "after-restart", f"ar-{gateway.port}", "still there?")["ok"]
    # nothing half-written: every stored reply follows its user message
    rows = topology.sqld.rows("SELECT thread_id, role FROM messages WHERE thread_id LIKE 'restart-%'"
                              " ORDER BY thread_id, created_at, seq")
    users = sum(1 for r in rows if r[1] == "user")
    assert users >= 12 - len(errors)


def test_a_frozen_sqld_is_a_clear_503_not_a_hang(topology: Topology) -> None:
    gateway = topology.gateways[0]
    pid = topology.sqld.server_pid
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        response = local_http.post(f"{gateway.url}/api/chat", timeout=30, json={
            "id": "frozen", "conversationId": "frozen", "messages": [user_message("f1", "hello?")]})
        waited = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert response.status_code == 503 and response.json()["error"], response.text
    assert waited < 25  # bounded by DEV_SERVER_DB_TIMEOUT_S (3 s), far from the client's 30
    assert chat(gateway, "frozen", "f2", "hello again")["ok"]


def test_a_reload_mid_reply_resumes_on_the_other_replica(topology: Topology) -> None:
    a, b = topology.gateways
    result = run_node("resume_chat.mjs", {"api": f"{a.url}/api/chat", "resumeApi": f"{b.url}/api/chat",
                                          "chatId": "reload", "text": "tell me something long [[slow]]",
                                          "body": {"conversationId": "reload"}, "abortAfterChunks": 8})
    assert result["error"] is None and result["status"] == "ready" and result["resumeStatus"] == 200, result
    user, assistant = result["messages"]  # the whole reply, once
    [text] = [p["text"] for p in assistant["parts"] if p["type"] == "text"]
    deadline = time.monotonic() + 15
    while True:
        rows = topology.sqld.rows("SELECT content FROM messages WHERE thread_id = 'reload' AND role = 'assistant'")
        stored = json.loads(rows[0][0]) if rows else {"metadata": {"interrupted": True}}
        if "interrupted" not in stored["metadata"]:
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert [p["text"] for p in stored["parts"] if p["type"] == "text"] == [text] and user["id"] == "reload-u1"


def test_a_replica_killed_mid_reply_resumes_on_another_with_what_it_sent(topology: Topology, tmp_path: Path) -> None:
    doomed = make_server("gateway", tmp_path, env={"DEV_SERVER_DB_URL": topology.sqld.url,
                                                   "DEV_SERVER_TELEMETRY": "false"})
    doomed.start()
    try:
        doomed.wait_healthy(timeout=60)
        seen = post_chat(doomed.url, "killed", "a long answer please [[slower]]", read_frames=6)
        recorded_through(topology.sqld.rows, "killed", seen[-1][0])
    finally:
        doomed.process.kill()
        doomed.stop()
    response, frames = resume(topology.gateways[1].url, "killed")
    assert response.status_code == 200
    assert frames[:len(seen)] == seen and frames[-1][1] == "[DONE]"
    assert "interrupted" in frames[-2][1]  # the producer is gone: said so, not a hang
    assert topology.sqld.rows("SELECT id FROM messages WHERE thread_id = 'killed' AND role = 'user'") == \
        [("killed-u",)]  # the user's message survived the crash


@pytest.mark.anyio
async def test_a_server_that_wants_a_token_gets_the_configured_one(tmp_path: Path) -> None:
    from dev_server.storage.errors import StorageError
    from dev_server.storage.remote import RemoteLibSQLStore

    with Sqld(tmp_path / "sqld", auth=True) as sqld:
        for token in (None, "not-a-token"):
            with pytest.raises(StorageError, match="refused the credentials"):
                await RemoteLibSQLStore(sqld.url, auth_token=token).open()
        settings = Settings(data_dir=tmp_path, db_url=sqld.url, db_auth_token=sqld.token(), telemetry=False)
        with serve("gateway", tmp_path, inprocess=True, settings=settings) as gateway:
            assert chat_turn(gateway, [user_message("k1", "hello")], body={"conversationId": "keyed"},
                             chat_id="keyed")["ok"]
        assert sqld.rows("SELECT id FROM messages WHERE thread_id = 'keyed' AND role = 'user'") == [("k1",)]


def test_a_token_in_the_url_is_used_and_never_shown(tmp_path: Path) -> None:
    with Sqld(tmp_path / "sqld", auth=True) as sqld:
        settings = Settings(data_dir=tmp_path, db_url=f"{sqld.url}?authToken={sqld.token()}", telemetry=False)
        with serve("gateway", tmp_path, inprocess=True, settings=settings) as gateway:
            health = local_http.get(f"{gateway.url}/health").json()
    assert health["status"] == "ok" and health["stores"]["default"]["url"] == sqld.url


def test_a_replica_killed_mid_load_loses_and_duplicates_no_acknowledged_turn(tmp_path: Path) -> None:
    """Two clients on each of four threads, alternating replicas; one replica is killed with
    SIGKILL while replies stream, and every client whose turn broke sends it again to the
    survivor, as a client failing over would. Every acknowledged turn (its stream reached
    ``finish``) must still be stored, and no message stored twice."""
    lease = {"DEV_SERVER_TURN_LEASE_S": "6", "DEV_SERVER_TELEMETRY": "false"}
    with Sqld(tmp_path / "sqld") as sqld:
        servers = [make_server("gateway", tmp_path / f"g{i}", env={"DEV_SERVER_DB_URL": sqld.url, **lease})
                   for i in (1, 2)]
        for server in servers:
            server.start()
        doomed, survivor = servers
        try:
            for server in servers:
                wait_models_ready(server)  # a turn waits for the warm-up: not a broken turn
            acked: list[tuple[str, str]] = []  # (user message id, reply id)
            killed = False

            def one_turn(url: str, thread: str, history: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
                try:
                    with local_http.stream("POST", f"{url}/api/chat", timeout=60,
                                      json={"conversationId": thread, "messages": history}) as response:
                        if response.status_code != 200:
                            return None
                        chunks = ui_chunks(frames_of(response))
                except httpx.HTTPError:
                    return None
                return chunks if chunks and chunks[-1]["type"] == "finish" else None

            def client(index: int) -> None:
                thread, history = f"load-{index % 4}", []
                for round_ in range(5):
                    history.append(user_message(f"c{index}-r{round_}", f"client {index} round {round_} [[slow]]"))
                    url = (doomed, survivor)[(index + round_) % 2].url if not killed else survivor.url
                    for attempt in range(12):
                        chunks = one_turn(url, thread, history)
                        if chunks is not None:
                            break
                        time.sleep(6.5 if attempt == 0 else 1.0)  # past the dead lease: the others go first
                        url = survivor.url
                    assert chunks is not None, f"client {index} round {round_} never got an answer"
                    reply_id = chunks[0]["messageId"]
                    acked.append((history[-1]["id"], reply_id))
                    history.append(ui_message(reply_id, "assistant", streamed_text(chunks)))

            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                futures = [pool.submit(client, i) for i in range(8)]
                deadline = time.monotonic() + 60
                while len(acked) < 10 and time.monotonic() < deadline:
                    time.sleep(0.05)
                doomed.process.kill()  # mid-load: replies are streaming on it
                killed = True
                for future in futures:
                    future.result()
            rows = sqld.rows("SELECT id, role, thread_id FROM messages WHERE thread_id LIKE 'load-%'")
            stored = {r[0] for r in rows}
            lost = [pair for pair in acked if not set(pair) <= stored]
            assert not lost, f"{len(lost)} acknowledged turns lost: {lost}"
            users = [r[0] for r in rows if r[1] == "user"]
            assert sorted(users) == sorted(f"c{i}-r{r}" for i in range(8) for r in range(5))  # each once
            replies = [r for r in rows if r[1] == "assistant"]
            assert len(replies) <= len(users) and len({r[0] for r in rows}) == len(rows)
        finally:
            for server in servers:
                server.stop()
