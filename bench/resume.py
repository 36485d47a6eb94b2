"""The resume path: time from reconnect to the first missed chunk, on another replica.

Two gateway processes on one data directory (replica A produces, replica B resumes). Each
round sends a slow reply (the local model's ``[[slow]]``: a word every 50 ms) to A, reads
a few frames, hangs up, waits while A keeps recording, then reconnects to B with
``Last-Event-ID`` and times the first frame B sends (the first chunk the client missed:
already in the database, so this is the replay path). Also timed: a *live* resume that has
missed nothing yet (``Last-Event-ID`` = the newest recorded frame), whose first frame
waits for the model's next word, A's next flush and B's next poll.

Baselines measured in the same run, on the same machine and file: a raw ``sqlite3`` read
of one recorded chunk (the floor of any database-backed replay), and a ``GET /health`` on
B over the same kept-alive connection (the floor of any HTTP round trip to B). Ratios are
resume / baseline.

Run: ``.venv/bin/python bench/resume.py [--rounds 20] [--sqld]``; with ``--sqld`` both replicas
use one libsql server and the raw read is one HTTP request to it.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import machine  # noqa: E402
from bench.servers import Server, server_env  # noqa: E402
from tests.sqld import Sqld  # noqa: E402
from tests.support import free_port  # noqa: E402

SEEN_FRAMES = 6
MISSED_WAIT_S = 0.3


def first_frame_s(client: httpx.Client, url: str, last_event_id: int) -> float:
    """Seconds from sending the resume GET to the first ``data:`` line of its answer."""
    started = time.perf_counter()
    with client.stream("GET", url, headers={"Last-Event-ID": str(last_event_id)}) as response:
        assert response.status_code == 200, response.status_code
        for line in response.iter_lines():
            if line.startswith("data: "):
                return time.perf_counter() - started
    raise AssertionError("the resumed stream sent no frame")


def hang_up_after(client: httpx.Client, url: str, chat_id: str, frames: int) -> int:
    """POST a slow message, read ``frames`` frames, hang up; the last SSE id read."""
    body = {"id": chat_id, "conversationId": chat_id, "messages": [
        {"id": f"{chat_id}-u", "role": "user", "parts": [{"type": "text", "text": "tell me something long [[slow]]"}]}]}
    last_id, read = 0, 0
    with client.stream("POST", url, json=body) as response:
        for line in response.iter_lines():
            if line.startswith("id: "):
                last_id = int(line[4:])
            elif line.startswith("data: "):
                read += 1
                if read >= frames:
                    break
    return last_id


ONE_CHUNK = ("SELECT c.seq, c.data FROM chat_streams s JOIN stream_chunks c USING (stream_id)"
             " WHERE s.chat_id = ? AND c.seq > ? ORDER BY c.seq LIMIT 1")
NEWEST = "SELECT max(c.seq) FROM chat_streams s JOIN stream_chunks c USING (stream_id) WHERE s.chat_id = ?"


def raw_read_s(db: Path | Sqld, chat_id: str, after: int) -> float:
    """One recorded chunk read straight from the database: the file with ``sqlite3``, or the
    server with one HTTP request (``--sqld``)."""
    if isinstance(db, Sqld):
        started = time.perf_counter()
        rows = db.rows(ONE_CHUNK, (chat_id, after))
        elapsed = time.perf_counter() - started
        assert rows
        return elapsed
    conn = sqlite3.connect(db)
    try:
        started = time.perf_counter()
        row = conn.execute(ONE_CHUNK, (chat_id, after)).fetchone()
        elapsed = time.perf_counter() - started
    finally:
        conn.close()
    assert row is not None
    return elapsed


def newest_id(db: Path | Sqld, chat_id: str) -> int:
    if isinstance(db, Sqld):
        return db.rows(NEWEST, (chat_id,))[0][0]
    with sqlite3.connect(db) as conn:
        return conn.execute(NEWEST, (chat_id,)).fetchone()[0]


def ms(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000 if len(values) > 1 else values[0] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--sqld", action="store_true", help="both replicas on a libsql server (sqld), not the file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        env = {**server_env(data, free_port()), "DEV_SERVER_WORKERS": "1", "DEV_SERVER_TELEMETRY": "false"}
        server = Sqld(Path(tmp) / "sqld").start() if args.sqld else None
        if server is not None:
            env["DEV_SERVER_DB_URL"] = server.url
        replicas = []
        for name in ("replica-a", "replica-b"):
            port = free_port()
            replicas.append(Server(name, [sys.executable, "-m", "dev_server", "gateway", "--port", str(port)],
                                   port, env, log_dir=Path(tmp)))
        a, b = replicas
        db: Path | Sqld = server if server is not None else data / "dev-server.db"
        try:
            for replica in replicas:
                replica.wait_ready()
            replay, live, raw, health = [], [], [], []
            with httpx.Client(timeout=30) as producer, httpx.Client(timeout=30) as resumer:
                for round_ in range(args.rounds + 1):  # round 0 warms both replicas up and is dropped
                    chat_id = f"bench-{round_}"
                    seen = hang_up_after(producer, f"{a.url}/api/chat", chat_id, SEEN_FRAMES)
                    time.sleep(MISSED_WAIT_S)  # A goes on recording what the client misses
                    replay_s = first_frame_s(resumer, f"{b.url}/api/chat/{chat_id}/stream", seen)
                    raw_s = raw_read_s(db, chat_id, seen)
                    started = time.perf_counter()
                    resumer.get(f"{b.url}/health").raise_for_status()
                    health_s = time.perf_counter() - started
                    live_s = first_frame_s(resumer, f"{b.url}/api/chat/{chat_id}/stream", newest_id(db, chat_id))
                    if round_:
                        replay.append(replay_s)
                        raw.append(raw_s)
                        health.append(health_s)
                        live.append(live_s)
                    time.sleep(2.0)  # let the reply finish before the next round
        finally:
            for replica in replicas:
                replica.stop()
            if server is not None:
                server.stop()
    where = "a libsql server (sqld)" if args.sqld else "the embedded file"
    print(f"machine: {'; '.join(machine())}; {args.rounds} rounds; both replicas on {where}")
    print(f"{'':44} {'p50 ms':>8} {'p90 ms':>8}")
    rows = [("resume on replica B, first missed chunk", replay),
            ("baseline: raw read of one chunk" + (" (HTTP)" if args.sqld else " (sqlite3)"), raw),
            ("baseline: GET /health on B (same connection)", health),
            ("live resume (nothing missed yet), first chunk", live)]
    for label, values in rows:
        print(f"{label:44} {ms(values, 50):8.2f} {ms(values, 90):8.2f}")
    print(f"ratio resume / raw read:   {statistics.median(replay) / statistics.median(raw):.1f}x")
    print(f"ratio resume / GET /health: {statistics.median(replay) / statistics.median(health):.1f}x")


if __name__ == "__main__":
    main()
