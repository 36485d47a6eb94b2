"""Exact token counts with tiktoken, offline.

Used where litellm does not count for us: the local model's usage. (For providers whose
stream omits usage, litellm already counts with the same tiktoken encodings, because every
call asks for ``stream_options.include_usage``.) The encoding is ``o200k_base``, that of
OpenAI's current models; its file ships inside litellm and ``dev_server.llm.offline`` points
``TIKTOKEN_CACHE_DIR`` at it before tiktoken loads anything (without importing litellm), so
nothing is downloaded.
Loading it takes ~0.5 s once per process; the warm-up pays it.
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
