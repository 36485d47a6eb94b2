"""The real JavaScript clients as judges, in one long-lived node process per test worker.

Starting node and loading ``ai`` or ``@mastra/client-js`` costs about 0.4 s of CPU; the suite
judges hundreds of turns. Harness scripts that export ``run(input)`` (see tests/js/harness.mjs)
are answered by tests/js/serve.mjs, started on first use and kept for the worker's life;
requests may overlap (each carries an id). The other scripts still run as one process each.
"""

from __future__ import annotations

import atexit
import itertools
import json
import subprocess
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

JS_DIR = Path(__file__).resolve().parents[1] / "js"
SERVED = frozenset({"chat_client.mjs", "om_client.mjs"})


class NodeJudge:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, Future] = {}
        self._process: subprocess.Popen | None = None

    def ask(self, script: str, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        answer: Future = Future()
        with self._lock:
            process = self._running()
            request_id = next(self._ids)
            self._waiting[request_id] = answer
            process.stdin.write(json.dumps({"id": request_id, "script": script, "input": payload}) + "\n")
            process.stdin.flush()
        try:
            reply = answer.result(timeout=timeout)
        except FutureTimeout:
            raise AssertionError(f"{script}: no answer from the node judge in {timeout} s") from None
        finally:
            with self._lock:
                self._waiting.pop(request_id, None)
        if "error" in reply:
            raise AssertionError(f"{script} failed in the node judge:\n{reply['error']}")
        return reply["result"]

    def _running(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(["node", str(JS_DIR / "serve.mjs")], cwd=JS_DIR, text=True,
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=subprocess.DEVNULL)  # the clients' own logging
            threading.Thread(target=self._read, args=(self._process,), daemon=True, name="node-judge").start()
        return self._process

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            reply = json.loads(line)
            with self._lock:
                waiting = self._waiting.get(reply.get("id"))
            if waiting is not None:
                waiting.set_result(reply)
        with self._lock:  # node is gone: whoever still waits hears it now, not at their timeout
            for waiting in self._waiting.values():
                if not waiting.done():
                    waiting.set_result({"error": f"the node judge exited ({process.poll()}); run the script alone"
                                                 " (node tests/js/SCRIPT < input.json) to see its output"})

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process.stdout.close()


_judge = NodeJudge()
atexit.register(_judge.close)


def ask(script: str, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
    return _judge.ask(script, payload, timeout)
