"""What a server process does before ``/health`` says ``status: ok`` (issue 31, item 4): what
serving needs, no more. Its start is CPU bound (imports, above all), so whatever it does
that a chat does not need stretches the seconds to ``ok``, most under load.

Each test runs a fresh interpreter: the test process has long imported everything.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.kit.servers import process_env
from tests.support import REPO

# What `python -m dev_server gateway` builds before it serves, and what it has imported then.
GATEWAY_START = """
import sys
import dev_server.__main__
from dev_server.factory import create_app

telemetry = create_app("gateway").state.services.telemetry
telemetry.open()
print(" ".join(sorted(name for name in sys.modules if name in {MODULES})) or "none")
telemetry.shutdown()
"""

# The warm-up of a server process (``freeze_heap``), with no automatic collection beside it.
WARM_UP = """
import asyncio, gc
from dev_server.api.deps import Readiness
from dev_server.factory import create_app, warm_up

llm = create_app("gateway").state.services.llm
gc.disable()
full = gc.get_stats()[2]["collections"]
readiness = Readiness()
asyncio.run(warm_up(llm, readiness, freeze_heap=True))
print(readiness.ready, gc.get_stats()[2]["collections"] - full, gc.get_freeze_count() > 0)
"""


def run_python(code: str, data_dir: Path) -> str:
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=process_env(data_dir), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_a_gateway_starts_without_what_it_has_not_used_yet(tmp_path: Path) -> None:
    # httpx: only `health` and dev's banner probe with it. The OTLP exporters (protobuf,
    # requests): built by the export queue's worker when the first spans or logs go out.
    # imagesize (and xml.etree with it): when OM first measures an image attachment.
    modules = {"httpx", "requests", "google.protobuf", "opentelemetry.exporter.otlp.proto.http", "imagesize",
               "xml.etree"}
    assert run_python(GATEWAY_START.replace("{MODULES}", repr(modules)), tmp_path) == "none"


def test_the_warm_up_freezes_the_heap_without_walking_all_of_it(tmp_path: Path) -> None:
    # A full collection before the freeze found nothing the imports' own collections had not
    # freed, and cost 33 ms of the start's CPU (250 ms with litellm imported).
    assert run_python(WARM_UP, tmp_path) == "True 0 True"
