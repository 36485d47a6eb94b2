"""One lock for the imports a process makes after start-up, at first use, from a thread.

litellm (imported at the first provider call, ``dev_server.llm.offline``) and OpenTelemetry's
OTLP exporters (built at the first export, ``dev_server.observability.telemetry``) both import
requests, whose modules import each other: a thread importing one of them while another
thread was halfway through the package found it half-initialised (``ImportError: cannot
import name ... from partially initialized module``). Whoever imports such a module at first
use holds ``LAZY_IMPORTS`` meanwhile, so these imports run one at a time.
"""

from __future__ import annotations

import threading

LAZY_IMPORTS = threading.RLock()
