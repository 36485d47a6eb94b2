"""tokenx 1.3.0's ``estimateTokenCount``, ported to the token (docs/observational-memory.md#tokens).

Mastra bundles this version of tokenx (npm's 2.x prices text differently), and every OM
threshold is in its tokens. JavaScript semantics are kept: ECMAScript whitespace, ASCII
``\\d``, lengths in UTF-16 code units. ``dev_server.om.tokens.counting`` builds message counts on it.
"""

from __future__ import annotations

import re
from functools import lru_cache

# --- tokenx 1.3.0 ---------------------------------------------------------------------------
#
# tokenx prices each segment of text.split(/(\s+|[punct]+)/):
#   whitespace -> 0; any CJK char -> one per code point; ASCII digits -> 1; at most 3 UTF-16
#   units -> 1; punctuation -> ceil(len/2); else ceil(len/chars-per-token), where that is 3
#   for German/French accents, 3.5 for Polish/Czech, 6 otherwise.
# A loop over segments in Python runs at ~4 MB/s. Instead the text is turned into bytes and
# mapped to one class letter per byte (bytes.translate), and the sums are read off with
# bytes.count, which run in C. A word of L units costs ceil(L/6) = 1 + floor((L-1)/6): one
# per word start, plus one per 6 characters left once each word's first is dropped. Words
# with a non-ASCII character are rare in most text and are priced one by one.

_PUNCTUATION = b".,!?;(){}[]<>:/\\|@#$%^&*+=`~_-"  # tokenx's set: no quotes
_SEPARATORS = frozenset(b"\t\n\x0b\x0c\r " + _PUNCTUATION)  # the ASCII part of JS \s, and those
_WORD_CLASS = bytes(0x20 if byte in _SEPARATORS else 0x61 for byte in range(256))  # ' ' / 'a'
_DIGIT_CLASS = bytes(0x20 if byte in _SEPARATORS else 0x30 if 0x30 <= byte <= 0x39 else 0x61 for byte in range(256))
_PUNCT_CLASS = bytes(0x70 if byte in _PUNCTUATION else 0x20 for byte in range(256))  # 'p' / ' '
_HIGH_CLASS = bytes(0x68 if byte >= 0x80 else 0x20 for byte in range(256))  # 'h' for UTF-8 beyond ASCII
_LONG_NUMBER = re.compile(rb" 0000000+")  # a 7+ digit run at a word start (a number costs 1)
_WIDE_SPACE = re.compile("[\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]")  # JS \s beyond ASCII
_CJK = re.compile("[\u4e00-\u9fff\u3400-\u4dbf\u3000-\u303f\uff00-\uffef\u30a0-\u30ff\u2e80-\u2eff\u31c0-\u31ef"
                  "\u3200-\u32ff\u3300-\u33ff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\ud7b0-\ud7ff]")
# tokenx's /[...]/i classes, with the case partners that JavaScript's case folding adds
_GERMAN = re.compile("[ÄÖÜßäöüẞ]")
_FRENCH = re.compile("[ÀÁÂÆÇÈÉÊËÍÎÏÑÓÔÙÚÛÜàáâæçèéêëíîïñóôùúûüÿŒœŸ]")
_SLAVIC = re.compile("[ÓÚÝóúýĄąĆćČčĎďĘęĚěŁłŃńŇňŘřŚśŠšŤťŮůŹźŻżŽž]")


def estimate_tokens(text: str) -> int:
    """tokenx 1.3.0 ``estimateTokenCount(text)``, to the token."""
    if not text:
        return 0
    wide = not text.isascii()
    if wide:
        if _WIDE_SPACE.search(text):
            text = _WIDE_SPACE.sub(" ", text)
        raw = text.encode("utf-8", "surrogatepass")
    else:
        raw = text.encode("ascii")
    words = raw.translate(_WORD_CLASS)
    spaced = b" " + words
    total = spaced.count(b" a") + spaced.replace(b" a", b" ").count(b"aaaaaa")
    digits = b" " + raw.translate(_DIGIT_CLASS) + b" "
    for match in _LONG_NUMBER.finditer(digits):
        if digits[match.end()] == 0x20:  # the digits are the whole word
            total -= (match.end() - match.start() - 2) // 6
    runs = b" " + raw.translate(_PUNCT_CLASS)
    # a run of L marks costs 1 up to 3, else ceil(L/2) = 1 + floor((L-1)/2); a run of 3 would
    # otherwise get 2, hence the runs of exactly three taken off
    total += (runs.count(b" p") + runs.replace(b" p", b" ").count(b"pp")
              - runs.count(b" ppp") + runs.count(b" pppp"))
    if wide:
        total += _repriced_wide_words(raw, words)
    return total


def _repriced_wide_words(raw: bytes, words: bytes) -> int:
    """What words holding non-ASCII characters cost beyond the ceil(bytes/6) charged above."""
    high = raw.translate(_HIGH_CLASS)
    correction = 0
    at = high.find(b"h")
    while at != -1:
        start = words.rfind(b" ", 0, at) + 1
        end = words.find(b" ", at)
        end = len(words) if end == -1 else end
        word = raw[start:end]
        correction += (_common_word_correction if len(word) <= 64 else _word_correction)(word)
        at = high.find(b"h", end)
    return correction


def _word_correction(word: bytes) -> int:
    return _wide_word_tokens(word.decode("utf-8", "surrogatepass")) - (len(word) + 5) // 6


_common_word_correction = lru_cache(maxsize=8192)(_word_correction)  # prose repeats its words


def _wide_word_tokens(word: str) -> int:
    if _CJK.search(word):
        return len(word)
    units = len(word.encode("utf-16-le", "surrogatepass")) // 2
    if units <= 3:
        return 1
    if _GERMAN.search(word) or _FRENCH.search(word):
        return -(-units // 3)
    if _SLAVIC.search(word):
        return -(-units * 2 // 7)  # ceil(units / 3.5)
    return -(-units // 6)
