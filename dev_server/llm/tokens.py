"""Exact token counts with tiktoken, offline, for the local observer's and reflector's output
budgets (``dev_server.llm.local_om_budget``: what a real model would write per call).

The encoding is ``o200k_base``, that of OpenAI's current models; its file ships inside
litellm and ``dev_server.llm.offline`` points ``TIKTOKEN_CACHE_DIR`` at it before tiktoken
loads anything (without importing litellm), so nothing is downloaded. Loading it costs ~0.5 s
and ~75 MB, so it is loaded on the first count: the first local observation or reflection of
a process, never at start nor on a plain turn (the local model's usage is estimated,
``dev_server.kernel.tokenx``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from dev_server.llm.offline import configure_tiktoken

ENCODING = "o200k_base"


@lru_cache(maxsize=1)
def _encoding() -> Any:
    configure_tiktoken()
    import tiktoken

    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    """Tokens in ``text`` (special-token lookalikes are counted as plain text). Long texts
    are remembered: memory's system messages (a 40k-token observation log) come back
    unchanged turn after turn, and encoding one costs ~8 ms."""
    if not text:
        return 0
    return _count_long(text) if len(text) > 2048 else len(_encoding().encode(text, disallowed_special=()))


@lru_cache(maxsize=64)
def _count_long(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))
