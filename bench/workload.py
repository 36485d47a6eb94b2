"""The whole-server workload (issue 16's table): turns, concurrency, bulk writes, reads, memory.

Our gateway and studio run as they do under ``make dev`` (two uvicorn processes sharing one
data directory, the built-in local model answering instantly, spans exported from the
gateway to the studio), so every figure is server overhead. Baseline, in the same run: a
bare FastAPI/uvicorn server (``BARE_APP``) that answers the same routes with the same bytes,
recorded from our servers at the start (the chat stream frame by frame through
sse-starlette, list and message pages as canned JSON).

Figures (each printed with its ratio to the bare server where it has one):
- sequential turn p50/p99 on a fresh thread, a 1k- and a 10k-message thread (gateway
  ``POST /api/chat``, one new user message per turn, read to ``[DONE]``);
- server CPU per turn (user+system time of every server process, over the 10k turns);
- turns/s with 8, 32 and 128 concurrent clients (each its own thread) and the cores used;
- first turn of 32 new threads sent at once, p50;
- ``save-messages`` of 10k messages in batches of 500 (msgs/s), ``POST /memory/threads``
  with 8 clients (threads/s);
- thread list page (100 of 10k threads) and messages page (40 of 11k) p50;
- RSS of the server processes at start, after warm-up and after each of two identical runs.

Run: ``make bench`` or ``.venv/bin/python bench/workload.py [--turns N] [--seconds S]
[--out bench/results/NAME.md]``. CPU and RSS come from /proc (Linux).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.chat_turn import seed  # noqa: E402
from tests.support import free_port  # noqa: E402

BARE_APP = """
import json, sys, uvicorn
from fastapi import FastAPI, Request, Response
from sse_starlette import EventSourceResponse
canned = json.load(open(sys.argv[2]))
app = FastAPI()

@app.get("/health")
def health():
    return {"status": "ok"}

@app.post("/api/chat")
async def chat(request: Request):
    await request.body()
    async def stream():
        for data in canned["frames"]:
            yield {"data": data}
    return EventSourceResponse(stream(), sep="\\n", headers={"x-vercel-ai-ui-message-stream": "v1"})

@app.get("/api/memory/threads")
def threads():
    return Response(canned["threads"], media_type="application/json")

@app.get("/api/memory/threads/{thread_id}/messages")
def messages(thread_id: str):
    return Response(canned["messages"], media_type="application/json")

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""
AGENT = "chat-agent"
TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


# -- processes and /proc -----------------------------------------------------------------------


class Server:
    def __init__(self, name: str, command: list[str], port: int, env: dict[str, str]) -> None:
        self.name, self.port = name, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).json().get("status") == "ok":
                    return
            except (httpx.TransportError, ValueError):
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} was not ready within {timeout} s")

    def pids(self) -> list[int]:
        """The server's process and its descendants (uvicorn workers, if any)."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry.name))
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    def cpu_s(self) -> float:
        total = 0.0
        for pid in self.pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
        return total

    def rss_mb(self) -> float:
        total = 0
        for pid in self.pids():
            try:
                total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
            except OSError:
                continue
        return total / 2**20

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def cpu(servers: list[Server]) -> float:
    return sum(s.cpu_s() for s in servers)


# -- requests ---------------------------------------------------------------------------------


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


def client(limit: int = 200) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
                                         limits=httpx.Limits(max_connections=limit, max_keepalive_connections=limit))
    return httpx.AsyncClient(timeout=120, transport=transport)


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of latencies in ms."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- scenarios --------------------------------------------------------------------------------


def sequential(base: str, conversation: str | None, turns: int) -> list[float]:
    spec = {"mode": "turns", "base": base, "clients": 1, "threads": [conversation], "fresh": conversation is None}
    load({**spec, "count": 3})
    return load({**spec, "count": turns})["latenciesMs"]


def concurrent(base: str, clients: int, seconds: float) -> tuple[int, float]:
    """Turns completed by ``clients`` loops (each on its own thread) in ``seconds``."""
    threads = [f"bench-conc-{clients}-{uuid.uuid4()}" for _ in range(clients)]
    spec = {"mode": "turns", "base": base, "clients": clients, "threads": threads}
    load({**spec, "count": 1})  # the threads exist
    result = load({**spec, "seconds": seconds})
    return result["done"], result["wallMs"] / 1000


def burst(base: str, count: int) -> list[float]:
    load({"mode": "turns", "base": base, "clients": 1, "fresh": True, "count": 1})
    return load({"mode": "burst", "base": base, "clients": count})["latenciesMs"]


async def save_messages(studio: str, total: int, batch: int) -> float:
    thread = f"bench-seed-{uuid.uuid4()}"
    async with client() as http:
        created = await http.post(f"{studio}/api/memory/threads?agentId={AGENT}",
                                  json={"threadId": thread, "resourceId": "bench-seed"})
        created.raise_for_status()
        started = time.perf_counter()
        for first in range(0, total, batch):
            messages = [{"id": f"{thread}-{i}", "threadId": thread, "resourceId": "bench-seed",
                         "role": "user" if i % 2 == 0 else "assistant", "createdAt": None,
                         "content": {"format": 2, "parts": [{"type": "text", "text": f"seeded message {i}"}]}}
                        for i in range(first, min(total, first + batch))]
            response = await http.post(f"{studio}/api/memory/save-messages?agentId={AGENT}",
                                       json={"messages": messages})
            response.raise_for_status()
        return total / (time.perf_counter() - started)


def create_threads(studio: str, total: int, clients: int) -> float:
    result = load({"mode": "post", "base": studio, "clients": clients, "count": total,
                   "path": f"/api/memory/threads?agentId={AGENT}",
                   "body": json.dumps({"resourceId": "bench-create", "title": "t {i}"})})
    return result["done"] / (result["wallMs"] / 1000)


def reads(url: str, count: int) -> list[float]:
    base, _, path = url.partition("/api/")
    load({"mode": "get", "base": base, "count": 5, "path": "/api/" + path})
    return load({"mode": "get", "base": base, "count": count, "path": "/api/" + path})["latenciesMs"]


async def seed_threads(db_path: Path, resource: str, count: int) -> None:
    from app.storage.conversations import ConversationStore
    from app.storage.libsql import LibSQLStore

    db = LibSQLStore(f"file:{db_path}")
    await db.open()
    store = ConversationStore(db)
    for i in range(count):
        await store.ensure_thread(f"{resource}-{i:05d}", resource, agent_id=AGENT)
    await db.close()


# -- the run ----------------------------------------------------------------------------------


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    memory = int(Path("/proc/meminfo").read_text().split()[1]) / 2**20
    return f"{os.cpu_count()} cores ({model}), {memory:.0f} GiB, Python {platform.python_version()}, {platform.system()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=100, help="sequential turns per scenario")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each concurrency level")
    parser.add_argument("--out", type=Path, help="also write the table (markdown) to this file")
    args = parser.parse_args()

    rows: list[tuple[str, str, str, str]] = []  # figure, ours, bare, ratio

    def row(figure: str, ours: float, bare: float | None = None, unit: str = "") -> None:
        ratio = f"{ours / bare:.1f}x" if bare else "-"
        rows.append((figure, f"{ours:,.2f}{unit}", f"{bare:,.2f}{unit}" if bare is not None else "-", ratio))
        print(f"{figure:<58} {rows[-1][1]:>12} {rows[-1][2]:>12} {ratio:>8}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        data = tmp_path / "data"
        data.mkdir()
        db_path = data / "dev-server.db"
        for thread, count in (("bench-1k", 1_000), ("bench-10k", 10_000)):
            asyncio.run(seed(db_path, thread, count))
        asyncio.run(seed_threads(db_path, "bench-list", 10_000))
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        studio_port, gateway_port, bare_port = free_port(), free_port(), free_port()
        env.update(DEV_SERVER_DATA_DIR=str(data), DEV_SERVER_LOG_LEVEL="warning",
                   DEV_SERVER_LOCAL_MODEL_ONLY="true", DEV_SERVER_STUDIO_PORT=str(studio_port))
        studio = Server("studio", [sys.executable, "-m", "app", "studio", "--port", str(studio_port)], studio_port, env)
        gateway = Server("gateway", [sys.executable, "-m", "app", "gateway", "--port", str(gateway_port)],
                         gateway_port, env)
        ours = [gateway, studio]
        bare: Server | None = None
        try:
            studio.wait_ready()
            gateway.wait_ready()
            rss_start = sum(s.rss_mb() for s in ours)
            list_url = f"/api/memory/threads?agentId={AGENT}&resourceId=bench-list&perPage=100&page=0"
            messages_url = f"/api/memory/threads/bench-10k/messages?agentId={AGENT}&perPage=40&page=0"

            async def record() -> dict:
                async with client() as http:
                    async with http.stream("POST", f"{gateway.url}/api/chat",
                                           json=chat_body(str(uuid.uuid4()), "hello")) as response:
                        text = (await response.aread()).decode()
                    return {"frames": [line[6:] for line in text.splitlines() if line.startswith("data: ")],
                            "threads": (await http.get(studio.url + list_url)).text,
                            "messages": (await http.get(studio.url + messages_url)).text}

            (tmp_path / "canned.json").write_text(json.dumps(asyncio.run(record())))
            bare = Server("bare", [sys.executable, "-c", BARE_APP, str(bare_port), str(tmp_path / "canned.json")],
                          bare_port, env)
            bare.wait_ready()
            print(f"machine: {machine()}")
            print(f"{'figure':<58} {'ours':>12} {'bare':>12} {'ratio':>8}")

            bare_seq = (sequential(bare.url, "bare", args.turns))
            for label, thread in (("fresh thread", None), ("1k-message thread", "bench-1k")):
                times = (sequential(gateway.url, thread, args.turns))
                row(f"sequential turn p50, {label}, ms", pct(times, .5), pct(bare_seq, .5))
            before, bare_before = cpu(ours), bare.cpu_s()
            times = (sequential(gateway.url, "bench-10k", args.turns))
            ours_cpu = (cpu(ours) - before) / (args.turns + 3) * 1000
            bare_seq = (sequential(bare.url, "bare", args.turns))
            bare_cpu = (bare.cpu_s() - bare_before) / (args.turns + 3) * 1000
            row("sequential turn p50, 10k-message thread, ms", pct(times, .5), pct(bare_seq, .5))
            row("sequential turn p99, 10k-message thread, ms", pct(times, .99), pct(bare_seq, .99))
            row("server CPU per turn (10k thread), ms", ours_cpu, bare_cpu)
            rss_warm = sum(s.rss_mb() for s in ours)

            rss_runs = []
            for run in (1, 2):
                for clients in (8, 32, 128):
                    before, wall_before = cpu(ours), time.perf_counter()
                    done, wall = (concurrent(gateway.url, clients, args.seconds))
                    cores = (cpu(ours) - before) / (time.perf_counter() - wall_before)
                    bare_before = bare.cpu_s()
                    bare_done, bare_wall = (concurrent(bare.url, clients, args.seconds))
                    if run == 1:
                        row(f"turns/s, {clients} concurrent clients", done / wall, bare_done / bare_wall)
                        row(f"server cores used, {clients} clients", cores)
                if run == 1:
                    one = statistics.median(sequential(gateway.url, None, 20))
                    first = (burst(gateway.url, 32))
                    bare_first = (burst(bare.url, 32))
                    row("first turn of 32 new threads at once, p50, ms", pct(first, .5), pct(bare_first, .5))
                    row("  the same, vs one sequential turn", pct(first, .5) / one, None, "x")
                    row("save-messages, 10k in batches of 500, msgs/s", asyncio.run(save_messages(studio.url, 10_000,
                                                                                                  500)))
                    row("POST /memory/threads, 8 clients, threads/s", (create_threads(studio.url, 2_000,
                                                                                                 8)))
                    row("thread list page (100 of 10k), p50 ms", pct((reads(studio.url + list_url, 200)), .5),
                        pct((reads(bare.url + list_url, 200)), .5))
                    row("messages page (40 of 11k), p50 ms", pct((reads(studio.url + messages_url, 200)), .5),
                        pct((reads(bare.url + messages_url, 200)), .5))
                rss_runs.append(sum(s.rss_mb() for s in ours))
            row("RSS at start, MB", rss_start, bare.rss_mb())
            row("RSS after warm-up, MB", rss_warm)
            row("RSS after run 1, MB", rss_runs[0])
            row("RSS after run 2 (identical), MB", rss_runs[1])
            row("  RSS after run 2 vs after warm-up", rss_runs[1] / rss_warm, None, "x")
        finally:
            for server in [*ours, *([bare] if bare else [])]:
                server.stop()

    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"# bench/workload.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
                 f"Machine: {machine()}. Turns per sequential scenario: {args.turns}; "
                 f"{args.seconds:g} s per concurrency level.", "",
                 "| figure | ours | bare server | ratio |", "|---|---:|---:|---:|",
                 *(f"| {a.strip()} | {b} | {c} | {d} |" for a, b, c, d in rows)]
        args.out.write_text("\n".join(lines) + "\n")
        print(f"written to {args.out}")


if __name__ == "__main__":
    main()
