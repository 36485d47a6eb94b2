"""Import and configure litellm once, so that it never touches the network on its own.

Importing litellm costs seconds, so nothing in ``dev_server.llm`` imports it at module level; the
first provider call (or the warm-up, when an agent's model needs it) calls
``prepare_litellm()``. A process whose models are all local never imports it
(``dev_server.llm.known_providers``); its tokenizer still reads litellm's bundled encodings
(``configure_tiktoken``, which finds them without importing litellm). Left alone, litellm
would:

* fetch its model cost map from GitHub at import time, unless
  ``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set *before* the import (we set it; the bundled
  backup map is used). ``LITELLM_OFFLINE_MODE=true`` is also defaulted, which makes its
  other self-initiated fetches (blog posts, Anthropic beta headers, Hugging Face
  tokenizers) use bundled copies. Neither affects calls to a provider you asked for.
* point tiktoken at its bundled encodings (cl100k, o200k, p50k) only when its encoding is
  first loaded. We set ``TIKTOKEN_CACHE_DIR`` to that directory up front (as litellm would,
  and honouring its ``CUSTOM_TIKTOKEN_CACHE_DIR`` override) so any tiktoken use in this
  process, ours included, reads those files instead of downloading them.
* print "Give Feedback / Get Help" banners on errors (``suppress_debug_info``).

litellm 1.110 has no client-side telemetry switch (its ``litellm.telemetry`` package is only
used by the proxy); callbacks are emptied and verbose logging is off. This mutates
process-wide state (environment variables, litellm module globals), which is inherent to
litellm's design; doing it here, once and idempotently, keeps it in one place.

litellm also keeps the provider SDK clients it makes (and their pooled connections) in a
process-wide cache, one set per event loop, and never closes them. A server process ends
with its loop; an app stopped in a process that goes on (the tests run many, each on a loop
of its own) must close its loop's clients itself (``close_loop_clients``), or their sockets
outlive the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import inspect
import logging
import os
import sys
import threading
import warnings
from pathlib import Path
from types import ModuleType

from dev_server.kernel.lazy_imports import LAZY_IMPORTS

_litellm: ModuleType | None = None

# sha1 of the cl100k_base URL: the file tiktoken looks for in TIKTOKEN_CACHE_DIR.
_CL100K_FILE = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"


def prepare_litellm() -> ModuleType:
    """Return the litellm module, importing and configuring it on the first call only."""
    global _litellm
    if _litellm is not None:
        return _litellm
    with LAZY_IMPORTS:  # requests, which litellm imports, is imported by the exporters too
        if _litellm is None:
            try:
                _litellm = _import_configured()
            except BaseException:
                # A half-finished import leaves litellm's modules in sys.modules, and every
                # later import would then fail on them; drop them so a retry starts clean.
                for name in [n for n in sys.modules if n == "litellm" or n.startswith("litellm.")]:
                    del sys.modules[name]
                raise
    return _litellm


def litellm_ready() -> bool:
    """Whether litellm is imported and configured in this process."""
    return _litellm is not None


def loaded_litellm() -> ModuleType | None:
    """The litellm module if it is already imported and configured, else None (never imports)."""
    return _litellm


async def ensure_litellm() -> ModuleType:
    """``prepare_litellm`` for async callers: the first import runs in a worker thread,
    so the event loop keeps serving while it takes its seconds.

    The thread is a daemon of our own (not a pool thread, which the interpreter joins at
    exit): a process asked to stop during the import stops at once.
    """
    if _litellm is not None:
        return _litellm
    loop = asyncio.get_running_loop()
    future: asyncio.Future[ModuleType] = loop.create_future()

    def settle(outcome: ModuleType | BaseException) -> None:
        if future.done():
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    def work() -> None:
        try:
            outcome: ModuleType | BaseException = prepare_litellm()
        except BaseException as exc:  # handed to the awaiting task
            outcome = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is waiting
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=work, name="litellm-import", daemon=True).start()
    return await future


async def close_loop_clients() -> None:
    """Close the clients litellm cached for the running event loop (none before its import)."""
    cache = getattr(_litellm, "in_memory_llm_clients_cache", None)
    if cache is None:
        return
    loop_suffix = cache.update_cache_key_with_event_loop("")  # how litellm ends a key bound to this loop
    if not loop_suffix:
        return
    for key in [key for key in tuple(cache.cache_dict) if key.endswith(loop_suffix)]:
        client = cache.cache_dict.get(key)
        cache.delete_cache(key)
        close = getattr(client, "aclose", None) or getattr(client, "close", None)
        try:
            closed = close() if close is not None else None
            if inspect.isawaitable(closed):
                await closed
        except Exception as exc:  # closing is best effort: the loop is about to end anyway
            logging.getLogger(__name__).warning("closing a litellm client failed: %s", exc)


def bundled_tokenizer_dir() -> Path:
    """Where litellm ships its tiktoken encodings (found without importing litellm)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("litellm is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"


def configure_tiktoken() -> None:
    """Point tiktoken at litellm's bundled encodings, as litellm's import would (honouring
    its ``CUSTOM_TIKTOKEN_CACHE_DIR`` override); call before tiktoken loads an encoding."""
    if os.environ.get("CUSTOM_TIKTOKEN_CACHE_DIR"):
        return
    tokenizers = bundled_tokenizer_dir()
    if (tokenizers / _CL100K_FILE).is_file():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(tokenizers)


def _import_configured() -> ModuleType:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    configure_tiktoken()

    # litellm's TypedDicts use ReadOnly, which pydantic warns about once per class while
    # building their schemas (at import and lazily on first calls): noise on every start,
    # and an error under pytest's filterwarnings=error. Process-wide, and only this one.
    warnings.filterwarnings("ignore", message=r"Items? .* (is|are) using the `ReadOnly` qualifier",
                            category=UserWarning)
    import litellm

    # litellm logs every call at INFO through its own handler (and again through ours).
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logging.getLogger(name).setLevel(logging.WARNING)
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    litellm.success_callback = []
    litellm.failure_callback = []
    litellm.callbacks = []
    litellm.input_callback = []
    return litellm
