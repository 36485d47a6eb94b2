"""Token estimation for Observational Memory (``dev_server.om.tokens.counting``, ``dev_server.om.tokens.attachments``).

The tokenx vectors and message examples are those of docs/observational-memory.md#tokens. The fast
``estimate_tokens`` is checked against ``reference_tokenx`` below, a line-by-line port of
tokenx 1.3.0's ``estimateTokenCount`` (split, then price each segment), on trap characters
and random text.
"""

from __future__ import annotations

import base64
import copy
import json
import math
import random
import re
import struct
import zlib

import pytest

from dev_server.kernel.messages import Message
from dev_server.om.tokens.attachments import estimate_attachment, image_dimensions
from dev_server.om.tokens.counting import (
    TOKEN_ESTIMATE_SOURCE,
    PartsTally,
    count_message,
    count_messages,
    count_string,
    estimate_tokens,
    format_tool_result,
    json_stringify,
    strip_token_estimates,
)

# --- a literal port of tokenx 1.3.0, the oracle ------------------------------------------------

_JS_SPACE = "\t\n\x0b\x0c\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_JS_PUNCT = r".,!?;(){}\[\]<>:/\\|@#$%^&*+=`~_\-"
_SPLIT = re.compile(f"([{_JS_SPACE}]+|[{_JS_PUNCT}]+)")
_CJK = re.compile("[\u4e00-\u9fff\u3400-\u4dbf\u3000-\u303f\uff00-\uffef\u30a0-\u30ff\u2e80-\u2eff\u31c0-\u31ef"
                  "\u3200-\u32ff\u3300-\u33ff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\ud7b0-\ud7ff]")
_LANGUAGES = [(re.compile("[äöüßẞ]", re.I), 3), (re.compile("[éèêëàâîïôûùüÿçœæáíóúñ]", re.I), 3),
              (re.compile("[ąćęłńóśźżěščřžýůúďťň]", re.I), 3.5)]


def reference_tokenx(text: str) -> int:
    total = 0
    for segment in filter(None, _SPLIT.split(text)):
        units = len(segment.encode("utf-16-le", "surrogatepass")) // 2
        if re.fullmatch(f"[{_JS_SPACE}]+", segment):
            continue
        if _CJK.search(segment):
            total += len(segment)
        elif re.fullmatch(r"[0-9]+(?:[.,][0-9]+)*", segment) or units <= 3:
            total += 1
        elif re.search(f"[{_JS_PUNCT}]", segment):
            total += math.ceil(units / 2) if units > 1 else 1
        else:
            per_token = next((rate for pattern, rate in _LANGUAGES if pattern.search(segment)), 6)
            total += math.ceil(units / per_token)
    return total


# --- docs/observational-memory.md#tokens ----------------------------------------------------------------------------

SPEC_VECTORS = [("Hello, world!", 4), ("The quick brown fox jumps over the lazy dog.", 10),
                ("internationalization", 4), ("über straße", 4), ("日本語のテキスト", 8), ('{"a":1}', 5),
                ('{"type":"step-start"}', 7), ("assistant", 2), ("user", 1), ("12,345.67", 5), ("🔴", 1)]


@pytest.mark.parametrize(("text", "tokens"), SPEC_VECTORS)
def test_spec_vectors(text, tokens):
    assert estimate_tokens(text) == tokens
    assert reference_tokenx(text) == tokens


@pytest.mark.parametrize(("text", "tokens"), [
    ("", 0), ("   \n\t ", 0), ("\ufeff", 0), ("\x1c", 1),
    ("abcdefg\x1cabcdefg", 3),  # \x1c-\x1f are not JS whitespace: one 15-unit word
    ("abcdefg\x1fabcdefg", 3),
    ("abcdefg\x85abcdefg", 3),  # nor is NEL
    ("abcdefg\u200babcdefg", 3),  # nor a zero-width space
    ("abcdefg\ufeffabcdefg", 4),  # a BOM is: two words
    ("abcdefg\u00a0abcdefg", 4), ("abcdefg\u3000abcdefg", 4), ("abcdefg\u2028abcdefg", 4),
    ("12345678", 1), ("1234567890123", 1), ("abc1234567", 2),  # a number costs 1, whatever its length
    ("١٢٣٤٥٦٧٨", 2),  # JS \d is ASCII: Arabic-Indic digits are a plain word
    ("🔴🔴", 1), ("🔴🔴🔴🔴", 2),  # emoji are 2 UTF-16 units each
    ("한국어", 3), ("abc日本", 5), ("𠀀", 1),  # an astral ideograph is outside tokenx's ranges
    ("ÜBERALL", 3), ("GROẞE", 2), ("Łękawica", 3), ("Dvořák", 2),
    ("...", 1), ("....", 2), ("-----", 3), ("a...b", 3),
    ("http://example.com/path?x=1", 12),
])
def test_javascript_semantics(text, tokens):
    assert estimate_tokens(text) == tokens
    assert reference_tokenx(text) == tokens


def test_matches_the_reference_on_random_text():
    alphabet = (list("abcXYZ0123456789 \t\n\x0b\x0c\r\x00\x1c\x1f\x7f\x85\xa0\u1680\u2000\u200a\u200b\u2028"
                     "\u202f\u3000\ufeff\ufffd.,:;!?-_{}[]()\"'`/\\|@#$%^&*+=~<>äöüßẞÄéÉçœąŁžЖ日本テ한ｱ\u0301")
                + ["🔴", "\U0001F600", "\U00020000", "\ud800", "0" * 7, "x" * 9, "..."])
    rng = random.Random(20260101)
    for _ in range(4000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert estimate_tokens(text) == reference_tokenx(text), repr(text)


def test_matches_the_reference_on_a_large_mixed_document():
    rng = random.Random(7)
    words = ["the", "observation", "memory", "über", "日本語", "12345678", "x=1;", "{\"k\": [1, 2.5]}", "🔴",
             "naïve", "Łódź", "http://a.b/c?d=e", "---", "\u00a0", "\t", "\n\n", "...", "1,234.56"]
    text = " ".join(rng.choice(words) for _ in range(20000))
    assert estimate_tokens(text) == reference_tokenx(text)
    assert count_string(text) == estimate_tokens(text)
    assert count_string(None) == 0


# --- docs/observational-memory.md#tokens messages -------------------------------------------------------------------

USER_TEXT = "Hello, I have two kids and I work at Acme Corp."


def message(role: str, *parts: dict, message_id: str = "m1") -> Message:
    return Message(message_id, "t1", "r1", role, {"format": 2, "parts": list(parts)}, "2026-01-01T14:30:00.000Z")


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def tool(state: str, **fields) -> dict:
    invocation = {"state": state, "toolCallId": "call-1", "toolName": "search", "args": {"q": "acme"}, **fields}
    return {"type": "tool-invocation", "toolInvocation": invocation}


def assistant_example() -> Message:
    # Constructed for the doc's sum 2+7+5+1+5+5: "search" is 1 token, args {"q":"acme"} are 5
    # ({ "q" : "acme" }), the result {"hits": 3} pretty-printed is 5 ({ "hits" : 3 }).
    return message("assistant", {"type": "step-start"}, text("I will search now."),
                   tool("result", result={"hits": 3}), message_id="m2")


def test_spec_message_examples():
    user = message("user", text(USER_TEXT))
    assert estimate_tokens(USER_TEXT) == 13
    assert count_message(user) == 18  # round(1 + 13 + 3.8)
    assert [estimate_tokens(s) for s in ("I will search now.", "search", '{"q":"acme"}',
                                         format_tool_result({"hits": 3}))] == [5, 1, 5, 5]
    assert count_message(assistant_example()) == 9  # round(2+7+5+1+5+5 + 3.8-12-12+3.8)
    assert count_messages([message("user", text(USER_TEXT)), assistant_example()]) == 51
    assert count_messages([]) == 0


def test_message_shapes():
    assert count_message({"role": "user", "content": USER_TEXT}) == 18  # string content
    legacy = {"role": "user", "content": {"format": 2, "content": USER_TEXT}}  # flat text, no parts
    assert count_message(legacy) == 18
    assert legacy["content"]["metadata"]["mastra"]["tokenEstimate"]["key"].startswith("content-content:")
    plain = {"role": "user", "content": USER_TEXT}
    count_message(plain)
    assert plain["metadata"]["mastra"]["tokenEstimate"]["key"].startswith("message-content:")
    # parts win over the flat text beside them
    assert count_message(message("user", text("Hi"))) == round(1 + 1 + 3.8)
    assert count_message(message("assistant", {"type": "data-om-status", "data": {"x": "y" * 500}},
                                 {"type": "reasoning", "reasoning": "long " * 200, "details": []})) == 6
    source = {"type": "source", "source": {"sourceType": "url", "id": "s1", "url": "https://example.com/a"}}
    expected = round(2 + estimate_tokens(json.dumps(source, separators=(",", ":"))) + 3.8)
    part = copy.deepcopy(source)
    assert count_message(message("assistant", part)) == expected
    assert "tokenEstimate" in part["providerMetadata"]["mastra"]
    assert count_message(message("assistant", part)) == expected  # the cached estimate is not counted


@pytest.mark.parametrize(("part", "payload", "overhead"), [
    (tool("call"), 1 + 5, 3.8 - 12),
    (tool("partial-call", args='{"q": "ac'), 1 + estimate_tokens('{"q": "ac'), 3.8),  # string args
    (tool("approval-requested"), 1 + 5, 3.8 - 12),
    (tool("result", result="3 hits"), 1 + 5 + estimate_tokens("3 hits"), 3.8 - 12 + 3.8),
    (tool("result", result={"hits": 3}), 1 + 5 + 5, 3.8 - 12 - 12 + 3.8),
    (tool("result", result=None), 1 + 5 + estimate_tokens("[empty result]"), 3.8 - 12 + 3.8),
    (tool("result", result="", isError=True), 1 + 5 + estimate_tokens("Tool execution failed"), 3.8 - 12 + 3.8),
    (tool("result", isError=True, errorText="Rate limited"), 1 + 5 + 3, 3.8 - 12 + 3.8),
    (tool("output-error", errorText="Boom: timeout"), 1 + 5 + estimate_tokens("Boom: timeout"), 3.8 - 12 + 3.8),
    (tool("output-denied"), 1 + 5 + estimate_tokens("Tool call was not approved by the user"), 3.8 - 12 + 3.8),
    (tool("output-denied", approval={"reason": "no"}), 1 + 5 + 1, 3.8 - 12 + 3.8),
    (tool("approval-responded", approval={"approved": True, "reason": "go ahead"}), 1 + 5 + 2, 3.8 - 12 + 3.8),
    (tool("call", args={}), 1 + 1, 3.8 - 12),  # {} is truthy in JavaScript
    (tool("call", args=None, toolName=""), 0, 3.8),
    (tool("result", result=4.0), 1 + 5 + 1, 3.8 - 12 - 12 + 3.8),  # JSON.stringify(4.0) is "4"
])
def test_tool_invocation_states(part, payload, overhead):
    assert count_message(message("assistant", part)) == math.floor(2 + payload + overhead + 0.5)


def test_a_growing_reply_is_tallied_part_by_part_as_count_message_counts_it_whole():
    """``PartsTally``: a reply between the steps of its turn (Observational Memory counts it at
    every step, each part once; a text part may still grow)."""
    parts: list[dict] = [{"type": "text", "text": "Let me look"}]
    tally = PartsTally()
    steps = [
        lambda: parts[0].update(text="Let me look that up for you."),  # the text grew in place
        lambda: parts.extend([tool("result", result={"hits": 3}), {"type": "step-start"}]),
        lambda: parts.extend([{"type": "data-om-status", "data": {"x": 1}}, text("Found three hits " * 20)]),
        lambda: parts.extend([tool("call"), tool("result", result="3 hits", toolCallId="c2")]),
    ]
    for change in [lambda: None, *steps]:
        change()
        assert tally.update(parts) == count_message(message("assistant", *copy.deepcopy(parts)))
    assert all("providerMetadata" not in p for p in parts)  # the live parts are left alone


def test_overhead_can_go_negative():
    assert count_message(message("assistant", tool("call"), tool("call"))) == -6  # round(2 + 12 + 3.8 - 24)


def test_unknown_tool_state_is_counted_as_json():
    part = tool("streaming-something")
    expected = estimate_tokens(json.dumps(part, separators=(",", ":")))
    assert count_message(message("assistant", part)) == round(2 + expected + 3.8)
    assert part["providerMetadata"]["mastra"]["tokenEstimate"]["key"].startswith("part-tool-invocation:")


def test_model_output_and_encrypted_content():
    shown = tool("result", result={"raw": "x" * 5000})
    shown["providerMetadata"] = {"mastra": {"modelOutput": "summary only"}}
    assert count_message(message("assistant", shown)) == round(2 + 6 + estimate_tokens("summary only") + 3.8 - 12 + 3.8)
    assert "tool-result-model-output-json:" in json.dumps(shown["providerMetadata"]["mastra"]["tokenEstimate"])
    secret = {"encryptedContent": "A" * 300, "short": {"encryptedContent": "B" * 10}}
    formatted = format_tool_result(secret)
    assert '"[stripped encryptedContent: 300 characters]"' in formatted and '"' + "B" * 10 + '"' in formatted
    assert json_stringify({"a": [1.0, 2.5, 1e-7, 1e21, float("nan")], "b": "1.0"}) == \
        '{"a":[1,2.5,1e-7,1e+21,null],"b":"1.0"}'


def test_a_one_megabyte_tool_result_is_counted_whole():
    rows = [{"id": i, "title": f"Result number {i}", "body": "lorem ipsum dolor sit amet " * 8} for i in range(4000)]
    part = tool("result", result={"rows": rows})
    pretty = json.dumps({"rows": rows}, indent=2, ensure_ascii=False)
    assert len(pretty) > 1_000_000
    assert count_message(message("assistant", part)) == round(2 + 1 + 5 + estimate_tokens(pretty) + 3.8 - 24 + 3.8)
    assert count_message(message("assistant", part)) > 200_000  # and again from the cache


# --- the cache --------------------------------------------------------------------------------


def estimate_of(part: dict) -> dict:
    return part["providerMetadata"]["mastra"]["tokenEstimate"]


def test_cache_is_written_and_hit():
    part = text(USER_TEXT)
    assert count_message(message("user", part)) == 18
    entry = estimate_of(part)
    assert entry["v"] == 7 and entry["source"] == TOKEN_ESTIMATE_SOURCE == "v7:tokenx" and entry["tokens"] == 13
    assert entry["key"] == "text:" + "5c5d2a56ca633ab55b74248c8dcabfe8e4231deb7be637f87d0ea8a2d47e65f1"
    entry["tokens"] = 100  # a hit returns what is stored
    assert count_message(message("user", part)) == round(1 + 100 + 3.8)
    assert count_message(message("user", part), cache=False) == 18


def test_cache_miss_and_mismatch_recompute():
    part = text(USER_TEXT)
    count_message(message("user", part))
    part["text"] = "Hi"  # a new payload: new key, and the stale text estimate goes
    assert count_message(message("user", part)) == round(1 + 1 + 3.8)
    assert estimate_of(part)["key"].startswith("text:") and estimate_of(part)["tokens"] == 1
    for field, stale in (("v", 6), ("source", "v6:tokenx")):
        estimate_of(part)[field] = stale
        estimate_of(part)["tokens"] = 99
        assert count_message(message("user", part)) == 6
        assert estimate_of(part)[field] == {"v": 7, "source": "v7:tokenx"}[field] and estimate_of(part)["tokens"] == 1


def test_several_kinds_make_a_map_and_no_cache_leaves_parts_alone():
    done = assistant_example()
    untouched = copy.deepcopy(done)
    assert count_message(untouched, cache=False) == 9 and untouched == assistant_example()
    assert count_message(done) == count_message(done) == 9
    estimates = estimate_of(done.content["parts"][2])
    kinds = sorted(key.split(":")[0] for key in estimates)
    assert kinds == ["tool-call-args-json", "tool-call-name", "tool-result-json"]
    assert all(entry["key"] == key for key, entry in estimates.items())


def test_strip_token_estimates():
    done = assistant_example()
    done.content["parts"][1]["providerMetadata"] = {"openai": {"itemId": "x"}}
    count_message(done)
    stripped = strip_token_estimates(done.content)
    assert stripped["parts"][0] == {"type": "step-start"}
    assert stripped["parts"][1]["providerMetadata"] == {"openai": {"itemId": "x"}}
    assert "tokenEstimate" not in json.dumps(stripped)
    assert "tokenEstimate" in json.dumps(done.content)  # the original is left as it was
    assert strip_token_estimates([text("a")]) == [text("a")]


# --- images and files -----------------------------------------------------------------------


def png(width: int, height: int, filler: int = 0) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr
            + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr)) + bytes(filler))


def jpeg(width: int, height: int) -> bytes:
    app1 = b"Exif\x00\x00" + bytes(6000)  # a large segment before the frame header
    frame = b"\x08" + struct.pack(">HH", height, width) + b"\x03" + bytes(9)
    return (b"\xff\xd8\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + bytes(9)
            + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1
            + b"\xff\xc0" + struct.pack(">H", len(frame) + 2) + frame + b"\xff\xd9")


def webp(chunk: bytes, body: bytes) -> bytes:
    return b"RIFF" + struct.pack("<I", 30) + b"WEBP" + chunk + struct.pack("<I", len(body)) + body


def data_url(raw: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(raw).decode()


def image_message(part: dict, role: str = "user") -> Message:
    return message(role, part)


def image_tokens(part: dict, provider: str | None = None) -> int:
    return round(count_message(image_message(part), provider=provider) - 1 - 3.8)


def test_image_headers():
    def reader(raw):
        return lambda start, length: raw[start:start + length]
    assert image_dimensions(reader(png(1024, 768))) == (1024, 768)
    assert image_dimensions(reader(jpeg(640, 480))) == (640, 480)
    assert image_dimensions(reader(b"GIF89a" + struct.pack("<HH", 320, 200) + bytes(20))) == (320, 200)
    vp8 = b"\x00\x00\x00\x9d\x01\x2a" + struct.pack("<HH", 800, 600) + bytes(10)
    assert image_dimensions(reader(webp(b"VP8 ", vp8))) == (800, 600)
    vp8l = b"\x2f" + struct.pack("<I", (800 - 1) | (600 - 1) << 14) + bytes(10)
    assert image_dimensions(reader(webp(b"VP8L", vp8l))) == (800, 600)
    vp8x = bytes(4) + (800 - 1).to_bytes(3, "little") + (600 - 1).to_bytes(3, "little") + bytes(4)
    assert image_dimensions(reader(webp(b"VP8X", vp8x))) == (800, 600)
    assert image_dimensions(reader(b"not an image at all")) is None
    estimate = estimate_attachment({"type": "file", "mimeType": "image/jpeg", "data": data_url(jpeg(640, 480))}, None)
    assert json.loads(estimate.payload)["width"] == 640  # read through base64, across the 6 KB segment


@pytest.mark.parametrize(("part", "provider", "tokens"), [
    ({"type": "file", "mimeType": "image/png", "data": data_url(png(1024, 1024))}, None, 85 + 4 * 170),
    ({"type": "file", "mimeType": "image/png", "data": data_url(png(1024, 1024))}, "openai", 85 + 4 * 170),
    ({"type": "file", "mimeType": "image/png", "data": data_url(png(1024, 1024)), "detail": "low"}, None, 85),
    ({"type": "file", "mimeType": "image/png", "data": data_url(png(512, 512))}, None, 85),  # auto: small is low
    ({"type": "image", "image": data_url(png(512, 512)), "providerOptions": {"openai": {"detail": "high"}}},
     None, 85 + 170),
    ({"type": "image", "image": base64.b64encode(png(1024, 1024)).decode()}, None, 85 + 4 * 170),  # bare base64
    ({"type": "image", "image": "https://example.com/cat.png"}, None, 85),  # unknown size, auto: low
    ({"type": "image", "image": "https://example.com/cat.png", "detail": "high"}, None, 85 + 4 * 170),
    ({"type": "file", "mimeType": "image/png", "data": data_url(png(1024, 1024))}, "google", 4 * 258),
    ({"type": "file", "mimeType": "image/png", "data": data_url(png(700, 700))}, "google", 258),
    ({"type": "file", "mimeType": "image/png", "data": data_url(png(1024, 1024))}, "google/gemini-3-pro", 1120),
    ({"type": "file", "mimeType": "image/png", "data": data_url(png(1024, 1024)), "mediaResolution": "low"},
     "google/gemini-3-pro", 280),
    ({"type": "file", "mimeType": "image/png", "data": data_url(png(1024, 1024))}, "anthropic", 1399),
    ({"type": "file", "mimeType": "image/png", "data": data_url(png(3000, 2000))}, "anthropic", 2185),
    ({"type": "image", "image": "https://example.com/cat.png"}, "anthropic", 1600),
    ({"type": "file", "mimeType": "image/png", "data": data_url(b"garbage" * 10)}, "anthropic", 341),
    ({"type": "file", "mimeType": "image/png", "data": data_url(png(1024, 1024)), "providerMetadata": {
        "mastra": {"tokenEstimate": {"v": 0, "source": "client", "key": "client", "tokens": 1234}}}},
     "anthropic", 1234),  # a caller's estimate wins
    ({"type": "file", "filename": "photo.JPG", "data": "https://example.com/x"}, "google", 258),  # by extension
])
def test_images_by_provider(part, provider, tokens):
    assert image_tokens(part, provider) == tokens


def test_openai_tiles_for_a_wide_image():
    # 4000x1000 fits into 2048x512; its short side is already under 768: 4 x 1 tiles
    part = {"type": "image", "image": data_url(png(4000, 1000)), "detail": "high"}
    assert image_tokens(part) == 85 + 4 * 170


@pytest.mark.parametrize(("provider", "tokens"), [(None, 10_000), ("google", 2_000), ("anthropic", 13_334)])
def test_files_by_size(provider, tokens):
    pdf = {"type": "file", "mimeType": "application/pdf", "data": data_url(bytes(40_000), "application/pdf")}
    assert image_tokens(pdf, provider) == tokens
    notes = {"type": "file", "mimeType": "text/plain", "data": data_url(b"a" * 4000, "text/plain"), "filename": "n.txt"}
    assert image_tokens(notes, provider) == 1000


def test_a_file_known_by_url_is_counted_by_its_descriptor():
    part = {"type": "file", "mimeType": "application/pdf", "data": "https://example.com/docs/Q3%20report.pdf"}
    descriptor = '{"type":"file","mimeType":"application/pdf","filename":"Q3 report.pdf"}'
    assert image_tokens(part) == estimate_tokens(descriptor)
    assert estimate_of(part)["key"].startswith("file-descriptor:")


def test_big_images_are_never_read_as_text():
    big = data_url(png(1024, 1024, filler=1_000_000))
    assert len(big) > 1_300_000
    assert estimate_tokens(big) > 100_000  # what reading it as text would have said
    part = {"type": "file", "mimeType": "image/png", "data": big}
    assert image_tokens(part) == 85 + 4 * 170
    assert estimate_of(part)["key"].startswith("image-like-file:")
    assert image_tokens(part) == 85 + 4 * 170  # and from the cache
    screenshot = tool("result", result={"type": "content", "value": [
        {"type": "text", "text": "Screenshot taken"}, {"type": "media", "data": big[22:], "mediaType": "image/png"}]})
    assert count_message(message("assistant", screenshot)) == round(2 + 1 + 5 + 3 + 765 + 3.8 - 12 - 12 + 3.8)
    assert "tool-result-multimodal-content:" in json.dumps(estimate_of(screenshot))
