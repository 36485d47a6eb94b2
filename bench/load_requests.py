"""The requests the workload benchmarks send: each through bench/load.mjs (Node's http
client), or over httpx where a request is one call (``save_messages``), with the latencies
or the rate the load generator measured."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
AGENT = "chat-agent"


def load(spec: dict) -> dict:
    """Run bench/load.mjs (Node's http client: Python's httpx tops out near the bare server's
    rate on this machine, so it would measure itself) and return what it reports."""
    done = subprocess.run(["node", str(REPO / "bench" / "load.mjs"), json.dumps(spec)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"load generator failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def chat_body(conversation: str, text: str) -> dict:
    return {"id": "bench", "trigger": "submit-message", "conversationId": conversation,
            "messages": [{"id": str(uuid.uuid4()), "role": "user", "parts": [{"type": "text", "text": text}]}]}


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of latencies in ms."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def sequential(base: str, conversation: str | None, turns: int) -> list[float]:
    spec = {"mode": "turns", "base": base, "clients": 1, "threads": [conversation], "fresh": conversation is None}
    load({**spec, "count": 3})
    return load({**spec, "count": turns})["latenciesMs"]


def concurrent(base: str, clients: int, seconds: float) -> tuple[int, float]:
    """Turns completed by ``clients`` loops (each on its own thread) in ``seconds``, and the wall time."""
    threads = [f"bench-conc-{clients}-{uuid.uuid4()}" for _ in range(clients)]
    spec = {"mode": "turns", "base": base, "clients": clients, "threads": threads}
    load({**spec, "count": 1})  # the threads exist
    result = load({**spec, "seconds": seconds})
    return result["done"], result["wallMs"] / 1000


def burst(base: str, count: int, route: dict | None = None) -> list[float]:
    """``count`` first turns on new threads sent at once (after one to warm up); ``route``:
    load.mjs's ``chatPath``/``format`` for another route than the gateway's ``/api/chat``."""
    route = route or {}
    load({"mode": "turns", "base": base, "clients": 1, "fresh": True, "count": 1, **route})
    return load({"mode": "burst", "base": base, "clients": count, **route})["latenciesMs"]


async def save_messages(studio: str, total: int, batch: int) -> float:
    thread = f"bench-seed-{uuid.uuid4()}"
    bodies = [{"messages": [{"id": f"{thread}-{i}", "threadId": thread, "resourceId": "bench-seed",
                             "role": "user" if i % 2 == 0 else "assistant", "createdAt": None,
                             "content": {"format": 2, "parts": [{"type": "text", "text": f"seeded message {i}"}]}}
                            for i in range(first, min(total, first + batch))]}
              for first in range(0, total, batch)]
    payloads = [json.dumps(body).encode() for body in bodies]  # encoded before the clock starts
    async with httpx.AsyncClient(timeout=120) as http:
        created = await http.post(f"{studio}/api/memory/threads?agentId={AGENT}",
                                  json={"threadId": thread, "resourceId": "bench-seed"})
        created.raise_for_status()
        started = time.perf_counter()
        for payload in payloads:
            response = await http.post(f"{studio}/api/memory/save-messages?agentId={AGENT}", content=payload,
                                       headers={"content-type": "application/json"})
            response.raise_for_status()
        return total / (time.perf_counter() - started)


def create_threads(studio: str, total: int, clients: int) -> float:
    return _thread_posts(studio, total, clients, json.dumps({"resourceId": "bench-create", "title": "t {i}"}))


def refuse_threads(server: str, total: int, clients: int) -> float:
    """The thread creation route answering 400 to a body without ``resourceId``: the server's
    HTTP stack and validation, no storage (what a creation costs at the least). Requests/s."""
    return _thread_posts(server, total, clients, "{}", status=400)


def _thread_posts(base: str, total: int, clients: int, body: str, **expected: int) -> float:
    """``total`` POSTs of ``body`` to the thread creation route, ``clients`` at a time; requests/s."""
    result = load({"mode": "post", "base": base, "clients": clients, "count": total, "body": body,
                   "path": f"/api/memory/threads?agentId={AGENT}", **expected})
    return result["done"] / (result["wallMs"] / 1000)


def reads(base: str, path: str, count: int) -> list[float]:
    load({"mode": "get", "base": base, "count": 5, "path": path})
    return load({"mode": "get", "base": base, "count": count, "path": path})["latenciesMs"]
