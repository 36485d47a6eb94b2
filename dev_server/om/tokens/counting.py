"""Token estimates for Observational Memory's thresholds: tokenx 1.3.0 and Mastra's TokenCounter.

OM decides when to observe and reflect by counting tokens on every step, so counting has to
be cheap and must agree with Mastra's numbers (docs/observational-memory.md#tokens). Two layers:

* ``estimate_tokens`` is a port of the heuristic of tokenx 1.3.0, the version Mastra bundles
  (docs/observational-memory.md#tokens): the text is split into whitespace runs, punctuation runs and the words between,
  each priced by a fixed rule. JavaScript semantics are kept: ECMAScript whitespace, ASCII
  ``\\d``, lengths in UTF-16 code units.
* ``count_message``/``count_messages`` are Mastra's TokenCounter (docs/observational-memory.md#tokens):
  the role, every part by its kind, a per-message overhead that tool calls move by -12 and tool results by one
  more message; images and files are priced by ``dev_server.om.tokens.attachments``.

Every part's payload estimate is cached in the part itself, at
``providerMetadata.mastra.tokenEstimate`` (string content: ``content.metadata.mastra``), as
``{v, source, key: "<kind>:<sha256 of the payload>", tokens}``, so it is persisted with the
message and shared with Mastra. A hit needs the same version, source and key; the overheads
are never cached. Counting with ``cache=False`` neither reads nor writes the cache.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from dev_server.kernel.tokenx import estimate_tokens
from dev_server.om.tokens.attachments import client_estimate, estimate_attachment, result_attachments

TOKENS_PER_MESSAGE = 3.8  # role, framing and separators of one message
TOKENS_PER_CONVERSATION = 24  # system framing and reply priming of a whole prompt
OBJECT_PAYLOAD_DISCOUNT = -12  # JSON args or results: their punctuation overcounts
TOKEN_ESTIMATE_VERSION = 7
TOKEN_ESTIMATE_SOURCE = f"v{TOKEN_ESTIMATE_VERSION}:tokenx"
EMPTY_RESULT = "[empty result]"
TOOL_FAILED = "Tool execution failed"
NOT_APPROVED = "Tool call was not approved by the user"

# --- JSON as JavaScript writes it ------------------------------------------------------------

_PYTHON_ONLY_NUMBER = re.compile(r"\d\.0(?!\d)|\de[-+]|NaN|Infinity")  # "2.0", "1e-07": JS says 2, 1e-7
_FLOAT_MARK = re.compile('"\ue000(\\d+)\ue001"')
_ENCRYPTED_KEY = "encryptedContent"
_ENCRYPTED_KEEP_UNITS = 256


def json_stringify(value: Any, *, pretty: bool = False) -> str:
    """``JSON.stringify(value)`` (``pretty``: ``JSON.stringify(value, null, 2)``)."""
    try:
        text = _dumps(value, pretty)
    except (TypeError, ValueError):  # a cycle, or keys JSON cannot hold
        return str(value)
    if _PYTHON_ONLY_NUMBER.search(text):  # rare; a string that merely looks like it costs a re-dump
        floats: list[float] = []
        marked = _mark_floats(value, floats)
        if floats:
            text = _FLOAT_MARK.sub(lambda match: _js_number(floats[int(match.group(1))]), _dumps(marked, pretty))
    return text


def format_tool_result(value: Any) -> str:
    """A tool result as it is counted: a string as is, else pretty JSON with long
    ``encryptedContent`` strings replaced by a note of their length."""
    if isinstance(value, str):
        return value
    text = json_stringify(value, pretty=True)
    if f'"{_ENCRYPTED_KEY}"' in text:
        text = json_stringify(_strip_encrypted(value), pretty=True)
    return text


def _dumps(value: Any, pretty: bool) -> str:
    if pretty:
        return json.dumps(value, ensure_ascii=False, indent=2, default=str)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _mark_floats(value: Any, floats: list[float]) -> Any:
    if isinstance(value, float):
        floats.append(value)
        return f"\ue000{len(floats) - 1}\ue001"
    if isinstance(value, dict):
        return {key: _mark_floats(item, floats) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mark_floats(item, floats) for item in value]
    return value


def _js_number(number: float) -> str:
    """``String(number)`` in JavaScript: no ``.0``, exponents only below 1e-6 or from 1e21."""
    if not math.isfinite(number):
        return "null"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    mantissa, _, exponent = repr(abs(number)).partition("e")  # shortest round-trip digits, as JS
    whole, _, fraction = mantissa.partition(".")
    significant = (whole + fraction).lstrip("0")
    # the value is 0.<digits> x 10^point
    point = len(whole) + int(exponent or 0) - (len(whole + fraction) - len(significant))
    digits = significant.rstrip("0")
    if len(digits) <= point <= 21:
        return sign + digits + "0" * (point - len(digits))
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    shown = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{shown}e{'+' if point - 1 >= 0 else '-'}{abs(point - 1)}"


def _strip_encrypted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _redacted(item) if key == _ENCRYPTED_KEY and isinstance(item, str) else _strip_encrypted(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [_strip_encrypted(item) for item in value]
    return value


def _redacted(text: str) -> str:
    units = len(text.encode("utf-16-le", "surrogatepass")) // 2
    return text if units <= _ENCRYPTED_KEEP_UNITS else f"[stripped encryptedContent: {units} characters]"


# --- TokenCounter --------------------------------------------------------------------------


def count_string(text: str | None) -> int:
    return estimate_tokens(text) if isinstance(text, str) else 0


def count_messages(messages: Iterable[Any], *, provider: str | None = None, cache: bool = True,
                   memo: dict[Any, int] | None = None) -> int:
    """Tokens of a prompt made of ``messages``: 24 plus each message; nothing at all is 0."""
    counts = [count_message(message, provider=provider, cache=cache, memo=memo) for message in messages]
    return TOKENS_PER_CONVERSATION + sum(counts) if counts else 0


_ROLE_TOKENS = {role: estimate_tokens(role) for role in ("user", "assistant", "system", "tool")}


def count_message(message: Any, *, provider: str | None = None, cache: bool = True,
                  memo: dict[Any, int] | None = None) -> int:
    """Tokens of one stored message (a ``Message``, anything with ``role`` and ``content``,
    or such a dict). ``provider`` (``"openai"``, ``"google/gemini-3-pro"``, ...) prices images.

    ``memo`` is the caller's, for as long as it counts one window several times (a turn's
    first step counts its window after each decision): a message read from the database
    is counted once there, under its id and the digest of its stored JSON
    (``Message.stored_digest``; any change to the stored content changes it). There is no
    process-wide memo: one that outlived turns grew with every message a process had seen
    and kept the allocator's arenas of short-lived turn data from being returned."""
    if memo is None or getattr(message, "stored_digest", None) is None or not cache:
        return _count_message(message, provider, cache)
    key = memo_key(message, provider)
    tokens = memo.get(key)
    if tokens is None:
        tokens = memo[key] = _count_message(message, provider, cache)
    return tokens


def memo_key(message: Any, provider: str | None = None) -> tuple[Any, ...]:
    """Where ``count_message`` keeps a stored message's count in its caller's ``memo``."""
    return message.id, message.stored_digest, provider


def _count_message(message: Any, provider: str | None, cache: bool) -> int:
    if isinstance(message, dict):
        role, content, message_owner = message.get("role"), message.get("content"), message
    else:
        role, content = getattr(message, "role", None), getattr(message, "content", None)
        metadata = getattr(message, "metadata", None)
        message_owner = {"metadata": metadata} if isinstance(metadata, dict) else None
    payload: float = _ROLE_TOKENS[role] if role in _ROLE_TOKENS else count_string(role)
    overhead = TOKENS_PER_MESSAGE
    extra_messages = 0
    if isinstance(content, str):
        payload += _cached(message_owner, "metadata", "message-content", content, cache)
    elif isinstance(content, dict):
        parts, flat = content.get("parts"), content.get("content")
        if isinstance(flat, str) and flat and not isinstance(parts, list):
            payload += _cached(content, "metadata", "content-content", flat, cache)
        elif isinstance(parts, list):
            for part in parts:
                if not isinstance(part, dict):
                    continue
                tokens, discount, extra = _count_part(part, provider, cache)
                payload += tokens
                overhead += discount
                extra_messages += extra
    if extra_messages:
        overhead += extra_messages * TOKENS_PER_MESSAGE
    return math.floor(payload + overhead + 0.5)  # JavaScript's Math.round


class PartsTally:
    """The tokens of a message whose parts only grow (a reply between the steps of its turn),
    counted part by part: ``update`` counts the parts added since the last call (and the last
    one again when it is text or reasoning, the only kinds that grow in place) and returns
    what ``count_message`` says for the whole message, summed in the same order. The cache
    is neither read nor written: the parts are the turn's live ones."""

    def __init__(self, role: str = "assistant", provider: str | None = None) -> None:
        self.role = role
        self.provider = provider
        self.counted: list[tuple[float, int, int]] = []  # (payload, overhead change, extra messages) per part

    def update(self, parts: Sequence[dict[str, Any]]) -> int:
        start = min(len(self.counted), len(parts))
        if start and parts[start - 1].get("type") in ("text", "reasoning"):
            start -= 1
        del self.counted[start:]
        self.counted.extend(_count_part(part, self.provider, False) if isinstance(part, dict) else (0.0, 0, 0)
                            for part in parts[start:])
        payload: float = _ROLE_TOKENS[self.role] if self.role in _ROLE_TOKENS else count_string(self.role)
        overhead: float = TOKENS_PER_MESSAGE
        extra_messages = 0
        for tokens, discount, extra in self.counted:
            payload += tokens
            overhead += discount
            extra_messages += extra
        if extra_messages:
            overhead += extra_messages * TOKENS_PER_MESSAGE
        return math.floor(payload + overhead + 0.5)


def _count_part(part: dict[str, Any], provider: str | None, cache: bool) -> tuple[float, int, int]:
    """(payload tokens, overhead change, extra messages) of one part."""
    part_type = part.get("type")
    if part_type in ("image", "file"):
        stamped = client_estimate(part)
        if stamped is not None:
            return stamped, 0, 0
        estimate = estimate_attachment(part, provider)
        assert estimate is not None  # image and file parts always have one
        return _part_cached(part, estimate.kind, estimate.payload, cache, estimate.tokens), 0, 0
    if part_type == "text":
        text = part.get("text")
        return _part_cached(part, "text", text if isinstance(text, str) else "", cache), 0, 0
    if part_type == "tool-invocation" and isinstance(part.get("toolInvocation"), dict):
        counted = _count_tool_invocation(part, part["toolInvocation"], provider, cache)
        if counted is not None:
            return counted
    if part_type == "reasoning" or (isinstance(part_type, str) and part_type.startswith("data-")):
        return 0, 0, 0
    kind = f"part-{part_type if isinstance(part_type, str) else 'undefined'}"
    return _part_cached(part, kind, json_stringify(_without_estimate(part)), cache), 0, 0


def _count_tool_invocation(part: dict[str, Any], invocation: dict[str, Any], provider: str | None,
                           cache: bool) -> tuple[float, int, int] | None:
    """Tool parts by state; None for a state this counter does not know (counted as JSON)."""
    state = invocation.get("state")
    known = ("call", "partial-call", "approval-requested", "result", "output-error", "output-denied",
             "approval-responded")
    if state not in known:
        return None
    tokens, discount = _count_signature(part, invocation, cache)  # every state keeps the call in context
    if state in ("call", "partial-call", "approval-requested"):
        return tokens, discount, 0
    approval = invocation.get("approval")
    reason = approval.get("reason") if isinstance(approval, dict) else None
    if state == "result":
        result_tokens, result_discount = _count_tool_result(part, invocation, provider, cache)
        tokens += result_tokens
        discount += result_discount
    elif state == "output-error":
        error = invocation.get("errorText")
        tokens += _part_cached(part, "tool-result-error", error if isinstance(error, str) else TOOL_FAILED, cache)
    elif state == "output-denied":
        tokens += _part_cached(part, "tool-result-denied", reason if isinstance(reason, str) else NOT_APPROVED, cache)
    elif isinstance(reason, str) and reason:
        tokens += _part_cached(part, "tool-approval-reason", reason, cache)
    return tokens, discount, 1  # the answer travels as a message of its own


def _count_signature(part: dict[str, Any], invocation: dict[str, Any], cache: bool) -> tuple[float, int]:
    """The tool's name and arguments."""
    tokens: float = 0
    discount = 0
    name, args = invocation.get("toolName"), invocation.get("args")
    if isinstance(name, str) and name:
        tokens += _part_cached(part, "tool-call-name", name, cache)
    if isinstance(args, str):
        tokens += _part_cached(part, "tool-call-args", args, cache) if args else 0
    elif _js_truthy(args):
        tokens += _part_cached(part, "tool-call-args-json", json_stringify(args), cache)
        discount += OBJECT_PAYLOAD_DISCOUNT
    return tokens, discount


def _count_tool_result(part: dict[str, Any], invocation: dict[str, Any], provider: str | None,
                       cache: bool) -> tuple[float, int]:
    mastra = _get(part.get("providerMetadata"), "mastra")
    if isinstance(mastra, dict) and "modelOutput" in mastra:  # what the model was actually shown
        value, kind = mastra["modelOutput"], "tool-result-model-output-json"
    else:
        value, kind = invocation.get("result"), "tool-result-json"
    if value is None or value == "":
        if _js_truthy(invocation.get("isError")):
            error = invocation.get("errorText")
            return _part_cached(part, "tool-result-error", error if isinstance(error, str) and error else TOOL_FAILED,
                                cache), 0
        return _part_cached(part, kind, EMPTY_RESULT, cache), 0
    tokens = _count_media_result(part, value, provider, cache)
    if tokens is None:
        tokens = _part_cached(part, kind, format_tool_result(value), cache)
    return tokens, 0 if isinstance(value, str) else OBJECT_PAYLOAD_DISCOUNT


def _count_media_result(part: dict[str, Any], value: Any, provider: str | None, cache: bool) -> float | None:
    """A result that returns images or files: each priced as an attachment, never its base64
    read as text. None when the result holds no inline attachment."""
    items = result_attachments(value)
    if items is None:
        return None
    total: float = 0
    described: list[Any] = []
    for item, attachment in items:
        if attachment is None:
            text = item.get("text") if item.get("type") == "text" else format_tool_result(item)
            if not isinstance(text, str):  # JavaScript's String(item.value ?? "")
                value = item.get("value")
                text = value if isinstance(value, str) else "" if value is None else json_stringify(value)
            total += estimate_tokens(text)
            described.append(["text", _sha256(text)])
            continue
        stamped = client_estimate(attachment)
        if stamped is not None:
            total += stamped
            described.append(["client", stamped])
            continue
        estimate = estimate_attachment(attachment, provider)
        assert estimate is not None  # an image or file part always has one
        total += estimate.tokens if estimate.tokens is not None else estimate_tokens(estimate.payload)
        described.append([estimate.kind, estimate.payload])
    payload = json_stringify({"type": "content", "value": described})
    return _part_cached(part, "tool-result-multimodal-content", payload, cache, total)


# --- the cache ------------------------------------------------------------------------------


def _part_cached(part: dict[str, Any], kind: str, payload: str, cache: bool, tokens: float | None = None) -> float:
    return _cached(part, "providerMetadata", kind, payload, cache, tokens)


def _cached(owner: dict[str, Any] | None, field: str, kind: str, payload: str, cache: bool,
            tokens: float | None = None) -> float:
    """Tokens of ``payload`` (or the given ``tokens``), read from or written to
    ``owner[field]["mastra"]["tokenEstimate"]`` under ``<kind>:<sha256 of payload>``."""
    if not cache or owner is None:
        return estimate_tokens(payload) if tokens is None else tokens
    key = f"{kind}:{_sha256(payload)}"
    stored = _get(_get(owner.get(field), "mastra"), "tokenEstimate")
    entry = stored if _is_entry(stored) else _get(stored, key)
    if _is_entry(entry) and entry["key"] == key and entry["v"] == TOKEN_ESTIMATE_VERSION \
            and entry["source"] == TOKEN_ESTIMATE_SOURCE and math.isfinite(entry["tokens"]):
        return entry["tokens"]
    if tokens is None:
        tokens = estimate_tokens(payload)
    if owner.get(field) is None:
        owner[field] = {}
    if isinstance(owner[field], dict) and owner[field].get("mastra") is None:
        owner[field]["mastra"] = {}
    mastra = _get(owner[field], "mastra")
    if isinstance(mastra, dict):  # anything else there is not ours to replace
        fresh = {"v": TOKEN_ESTIMATE_VERSION, "source": TOKEN_ESTIMATE_SOURCE, "key": key, "tokens": tokens}
        mastra["tokenEstimate"] = _merged(mastra.get("tokenEstimate"), kind, fresh)
    return tokens


def _merged(stored: Any, kind: str, fresh: dict[str, Any]) -> dict[str, Any]:
    """One entry, or a map key -> entry when the part holds estimates of several kinds.
    An older estimate of the same kind (the payload changed) is dropped, so maps stay small."""
    entries = {stored["key"]: stored} if _is_entry(stored) else stored if isinstance(stored, dict) else {}
    entries = {key: entry for key, entry in entries.items() if not key.startswith(f"{kind}:")}
    entries[fresh["key"]] = fresh
    return fresh if len(entries) == 1 else entries


def _is_entry(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("key"), str) and isinstance(value.get("source"), str)
            and type(value.get("v")) in (int, float) and type(value.get("tokens")) in (int, float))  # not bool


def strip_token_estimates(value: Any) -> Any:
    """A copy of a part, a message's content or a list of parts without the cached estimates
    (``providerMetadata.mastra.tokenEstimate``, ``metadata.mastra.tokenEstimate``), dropping
    containers left empty. What is not changed is shared, not copied."""
    if isinstance(value, list):
        return [strip_token_estimates(item) for item in value]
    if not isinstance(value, dict):
        return value
    stripped = _without_estimate(_without_estimate(value), "metadata")
    if isinstance(stripped.get("parts"), list):
        stripped = {**stripped, "parts": strip_token_estimates(stripped["parts"])}
    return stripped


def _without_estimate(value: dict[str, Any], field: str = "providerMetadata") -> dict[str, Any]:
    container = value.get(field)
    mastra = _get(container, "mastra")
    if not isinstance(mastra, dict) or not _js_truthy(mastra.get("tokenEstimate")):
        return value
    mastra = {key: item for key, item in mastra.items() if key != "tokenEstimate"}
    # rebuilt in place: JSON.stringify of the copy keeps the original key order
    container = {key: mastra if key == "mastra" else item
                 for key, item in container.items() if key != "mastra" or mastra}
    return {key: container if key == field else item for key, item in value.items() if key != field or container}


# --- small helpers ----------------------------------------------------------------------------


def _sha256(text: str) -> str:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: Node hashes them as U+FFFD
        data = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace").encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def _js_truthy(value: Any) -> bool:
    if isinstance(value, (str, int, float)):  # "", 0, NaN and false are falsy
        return bool(value) and value == value
    return value is not None  # objects and arrays, even empty ones


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None
