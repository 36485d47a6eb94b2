"""The built-in local model: deterministic, offline, and visibly context-aware.

It answers when no provider key is configured (or ``local/...`` is asked for), so
``make dev`` and the tests need no network. It streams the events of ``LLMClient.stream``
itself (``stream_local``) rather than through litellm (whose per-chunk wrapper would be
most of a turn's cost here); its failure is the error a provider's dropped connection
becomes, so retries and error handling are exercised alike.

Every answer starts with ``[local model] `` and is decided from the messages it received,
which makes memory demonstrable: what reaches it is exactly what memory fed the model.

1. If the last user message asks for their name ("what is my name", "who am I", "do you
   remember my name") it answers with the name from the latest earlier "my name is X" /
   "call me X" (in its messages, else in the system messages memory injected: observations
   keep what was said), or says it has not been told one.
2. If it asks what they said earlier ("what did I say earlier?", "what have I told you so
   far", "remind me what I said", "my previous messages", ...; a question mark or a word
   like earlier/before/previously/so far is required) it quotes the earlier user messages
   in order, or says there are none.
3. Otherwise: ``You said: "<last user text>". I can see N earlier messages in this
   conversation.`` where N counts the non-system messages before the last user message.

If a system message is present it adds "I was also given system instructions." If the last
user message carries attachments (OpenAI ``image_url`` / ``file`` content parts) it adds
``I received N attachment(s): <media types>.``, e.g. ``I received 2 attachments:
image/png, application/pdf.``, so what reaches a model can be checked offline. The text is
streamed in word-ish pieces (each piece carries its leading whitespace, so joining them
gives the answer back). Usage is estimated (``dev_server.kernel.tokenx``, the estimator Observational Memory
counts with; an exact tokenizer held ~75 MB per process): input tokens = the text of all
messages, output tokens = the reply.

Tools (when the request offers them, litellm's ``tools=[...]``), decided from the last user
message, never by chance:

* ``call <tool> with {json}`` -- calls ``<tool>`` with that JSON text as its arguments,
  verbatim (so invalid arguments can be tested), e.g. ``call calculator with
  {"expression": "2 + 3"}``.
* ``use the <tool> tool [to|on|for|:] <text>`` -- calls ``<tool>``; when its input schema
  has exactly one required string field, ``<text>`` is that field, else the arguments are
  ``{}``; e.g. ``use the calculator tool: 6 * 7``.
* On the step after the results (``tool`` messages after the last user message) it answers
  ``The <tool> tool returned: <result JSON>.``, one sentence per result, and calls nothing.
* ``[[loop]]`` in the message -- it calls the tool again on every step, results or not, so
  ``max_steps`` can be tested.

Working memory (``dev_server.llm.local_working_memory``; when the request offers the ``updateWorkingMemory`` tool and a
system message carries the working memory, ``dev_server.memory.working_document.instruction``):

* ``remember that <fact>`` -- calls ``updateWorkingMemory`` with the document updated by
  one line. Markdown: the first ``- **Label**:`` line whose label shares a word with the
  fact gets it (as its value when empty, else as a ``  - <fact>`` sub-line), else the
  ``Facts`` label, else a ``- <fact>`` line at the end of the first heading's section
  sharing a word, else at the end. A JSON memory gets ``{"memory": {"facts": [...the
  stored facts, <fact>]}}``. The next step confirms with ``The updateWorkingMemory tool
  returned: ...``.
* ``what do you know about me?`` (or ``... remember about me``) -- answers ``From my
  working memory: <the filled lines of the document>.``, or says it is empty.

Tool call ids are ``call_<n>``, ``n`` counting the tool calls already in the messages. The
arguments are streamed in three pieces (``tool_calls`` deltas), as providers stream them.
A tool named in a phrase but not offered is not called (the usual answer follows).

Titles: when a system message asks to "write (or generate) a short title" (the title
request of ``dev_server.memory.titles``), the answer is the title alone, without the prefix: the
first six words of the last user message, test triggers and quotes, colons and trailing
punctuation removed (``What is the weather in Rome?`` -> ``What is the weather in Rome``).

Observational Memory: an observer or reflector request (``dev_server.om.prompting.prompts``, recognised by
the first sentence of its system prompt) is answered by ``dev_server.llm.local_observer``, without
the prefix: dated observations in the format ``dev_server.om.prompting.parsing`` reads. The triggers below do
not apply to it (the observed transcript is full of old user messages); it has its own.

Test triggers, in the last user message:

* ``[[slow]]`` -- each piece is delayed by 50 ms, so a client can disconnect mid-stream.
* ``[[slower]]`` -- each piece is delayed by 250 ms, so a process can be killed mid-stream
  after its reply was checkpointed.
* ``[[fail]]`` -- after two pieces it raises a ``connection`` ``ModelProviderError`` (what a
  provider's dropped connection becomes), so a crash mid-stream can be tested.

No randomness, no clock: the same messages always give the same pieces.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from dev_server.kernel.count_memo import CountMemo
from dev_server.kernel.model import Finish, ModelEvent, TextDelta, ToolCall, ToolCallDelta, Usage
from dev_server.kernel.prompt_marks import TOOL_NAME as WORKING_MEMORY_TOOL
from dev_server.kernel.tokenx import estimate_tokens
from dev_server.llm.content import attachments
from dev_server.llm.errors import ModelProviderError, connection_message
from dev_server.llm.local_observer import om_reply
from dev_server.llm.local_working_memory import (
    InjectedMemory,
    asks_about_me,
    injected_memory,
    known_about_user,
    remembered,
    remembered_fact,
)
from dev_server.llm.models import LOCAL_PROVIDER

PREFIX = "[local model] "
SLOW_TRIGGER = "[[slow]]"
SLOWER_TRIGGER = "[[slower]]"
FAIL_TRIGGER = "[[fail]]"
SLOW_DELAY_S = 0.05
SLOWER_DELAY_S = 0.25
FAIL_AFTER_PIECES = 2
_QUOTE_LIMIT = 160
LOOP_TRIGGER = "[[loop]]"
_CALL_WITH = re.compile(r"\bcall\s+([A-Za-z_][\w-]*)\s+with\s+(\{.*\})", re.S)
_USE_TOOL = re.compile(r"\buse\s+the\s+([A-Za-z_][\w-]*)\s+tool\b[\s:,]*(?:(?:to|on|for)\s+)?(.*)", re.I | re.S)


_PIECE = re.compile(r"\s*\S+")
_NAME_QUESTION = re.compile(
    r"\bwhat(?:'s|\s+is|\s+was)\s+my\s+name\b|\bwho\s+am\s+i\b|\b(?:know|remember)\s+my\s+name\b", re.I
)
_NAME_STATED = re.compile(r"\b(?:my\s+name\s+is|call\s+me|i\s+am\s+called)\s+(.+)", re.I)
_RECALL = re.compile(
    r"\bwhat\b[^?.!]*\b(?:i|we)\s+(?:have\s+|had\s+)?(?:just\s+|already\s+)?"
    r"(?:say|said|tell|told|write|wrote|written|ask|asked|mention|mentioned|type|typed)\b"
    r"|\b(?:repeat|remind\s+me|recap)\b[^?.!]*\b(?:i|my)\b"
    r"|\b(?:earlier|previous|prior|past)\s+(?:messages?|questions?)\b",
    re.I,
)
_RECALL_WHEN = re.compile(r"\?|\b(?:earlier|before|previous(?:ly)?|prior|so\s+far|ago|just)\b", re.I)


@dataclass(frozen=True)
class LocalToolCall:
    id: str
    name: str
    arguments: str


def compose_tool_calls(messages: Sequence[dict[str, Any]],
                       tools: Sequence[dict[str, Any]]) -> tuple[LocalToolCall, ...]:
    """The tool calls the local model makes for ``messages`` (see the module docstring)."""
    offered = {t.get("function", {}).get("name"): t.get("function", {}) for t in tools or ()}
    if not offered:
        return ()
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last_user is None:
        return ()
    text = message_text(messages[last_user].get("content"))
    answered = any(m.get("role") == "tool" for m in messages[last_user + 1:])
    if answered and LOOP_TRIGGER not in text:
        return ()
    made = sum(len(m.get("tool_calls") or ()) for m in messages if m.get("role") == "assistant")
    match = _CALL_WITH.search(text)
    if match and match.group(1) in offered:
        return (LocalToolCall(f"call_{made}", match.group(1), match.group(2).strip()),)
    match = _USE_TOOL.search(text)
    if match and match.group(1) in offered:
        rest = match.group(2).replace(LOOP_TRIGGER, "").strip().rstrip(".")
        parameters = offered[match.group(1)].get("parameters") or {}
        required = parameters.get("required") or []
        properties = parameters.get("properties") or {}
        arguments: dict[str, Any] = {}
        if rest and len(required) == 1 and properties.get(required[0], {}).get("type") == "string":
            arguments = {required[0]: rest}
        return (LocalToolCall(f"call_{made}", match.group(1), json.dumps(arguments)),)
    fact = remembered_fact(text)
    memory = _injected(messages) if fact and WORKING_MEMORY_TOOL in offered else None
    if memory is not None:
        return (LocalToolCall(f"call_{made}", WORKING_MEMORY_TOOL, json.dumps({"memory": remembered(memory, fact)})),)
    return ()


def _injected(messages: Sequence[dict[str, Any]]) -> InjectedMemory | None:
    return injected_memory(message_text(m.get("content")) for m in messages if m.get("role") == "system")


def _tool_results_answer(messages: Sequence[dict[str, Any]]) -> str | None:
    """``The <tool> tool returned: ...`` for the tool results after the last user message."""
    last_user = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), -1)
    results = [m for m in messages[last_user + 1:] if m.get("role") == "tool"]
    if not results:
        return None
    names = {c.get("id"): c.get("function", {}).get("name") for m in messages if m.get("role") == "assistant"
             for c in m.get("tool_calls") or ()}
    return " ".join(f"The {names.get(m.get('tool_call_id'), 'unknown')} tool returned: "
                    f"{message_text(m.get('content'))}." for m in results)


_TITLE_REQUEST = re.compile(r"\b(?:write|generate)\s+a\s+short\s+title\b", re.I)
_TRIGGER = re.compile(r"\[\[\w+\]\]")
_TITLE_WORDS = 6


def is_title_request(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether ``messages`` ask for a thread title (``dev_server.memory.titles``)."""
    # the request says so in its opening words; memory's long system messages are not read through
    return any(m.get("role") == "system" and _TITLE_REQUEST.search(message_text(m.get("content"))[:200])
               for m in messages)


def _title_answer(messages: Sequence[dict[str, Any]]) -> str | None:
    """The title for a title request (see the module docstring), else None."""
    if not is_title_request(messages):
        return None
    text = _TRIGGER.sub(" ", _last_user_text(messages))
    words = [w.strip("\"'`:") for w in text.replace(":", " ").split()][:_TITLE_WORDS]
    return " ".join(w for w in words if w).rstrip(".,!?;") or "New conversation"


@dataclass(frozen=True)
class LocalReply:
    """What the local model will say for a message list, already split into pieces."""

    text: str
    pieces: tuple[str, ...]
    input_tokens: int
    output_tokens: int
    slow: bool
    fail: bool
    delay_s: float = 0.0


def message_text(content: Any) -> str:
    """The text of an OpenAI-style ``content`` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return " ".join(t for t in parts if isinstance(t, str))
    return ""


def _text_tokens(text: str) -> int:
    """The usage's input tokens of one message. A turn's input repeats the last turn's (with
    Observational Memory, a window of hundreds of messages, and the observations: a system
    message of up to the reflection threshold, 40,000 tokens by default): a text is estimated
    once, not at every call (tokenx reads every character), and the memo keeps its count,
    not the text."""
    return _input_tokens(text)


_input_tokens = CountMemo(lambda text: estimate_tokens(text), 16_384)  # this module's estimate_tokens when called


MEMORY_PIECE_CHARS = 2_048


def _memory_pieces(text: str) -> tuple[str, ...]:
    """An observer's or reflector's answer in pieces of ``MEMORY_PIECE_CHARS``: it is read whole
    (``dev_server.llm.complete``), never shown as it streams, and a reflection of tens of
    thousands of tokens streamed a word a piece spent most of its time passing the pieces on."""
    return tuple(text[i:i + MEMORY_PIECE_CHARS] for i in range(0, len(text), MEMORY_PIECE_CHARS))


def compose_reply(messages: Sequence[dict[str, Any]]) -> LocalReply:
    texts = [message_text(m.get("content")) for m in messages]
    memory = om_reply(messages)
    text = memory.text if memory is not None else _title_answer(messages) or (
        PREFIX + (_tool_results_answer(messages) or (_answer(messages) + _acknowledgement(messages))))
    last_user = "" if memory is not None else _last_user_text(messages)
    return LocalReply(
        text=text,
        pieces=tuple(_PIECE.findall(text)) if memory is None else _memory_pieces(text.rstrip()),
        input_tokens=sum(map(_text_tokens, texts)),
        output_tokens=estimate_tokens(text),
        slow=SLOW_TRIGGER in last_user or SLOWER_TRIGGER in last_user,
        fail=memory.fail if memory is not None else FAIL_TRIGGER in last_user,
        delay_s=SLOWER_DELAY_S if SLOWER_TRIGGER in last_user else SLOW_DELAY_S if SLOW_TRIGGER in last_user else 0.0,
    )


def _acknowledgement(messages: Sequence[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            media = attachments(m.get("content"))
            if media:
                return f" I received {_plural(len(media), 'attachment')}: {', '.join(media)}."
            return ""
    return ""


def _last_user_text(messages: Sequence[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            return message_text(m.get("content"))
    return ""


def _answer(messages: Sequence[dict[str, Any]]) -> str:
    convo = [m for m in messages if m.get("role") != "system"]
    suffix = " I was also given system instructions." if len(convo) < len(messages) else ""
    user_positions = [i for i, m in enumerate(convo) if m.get("role") == "user"]
    if not user_positions:
        return "I did not receive a user message." + suffix
    last_index = user_positions[-1]
    last = message_text(convo[last_index].get("content"))
    memory = _injected(messages) if asks_about_me(last) else None
    if memory is not None:
        return known_about_user(memory) + suffix
    name_question, recall = _NAME_QUESTION.search(last), _RECALL.search(last) and _RECALL_WHEN.search(last)
    if not (name_question or recall):  # the usual answer: the earlier messages' texts are not read
        return (f"You said: {_quote(last)}. I can see {_plural(last_index, 'earlier message')} in this "
                "conversation." + suffix)
    earlier_user = [message_text(convo[i].get("content")) for i in user_positions[:-1]]
    if name_question:
        # the earlier messages, else what memory injected (Observational Memory's observations)
        name = _stated_name(earlier_user) or _stated_name(
            [message_text(m.get("content")) for m in messages if m.get("role") == "system"])
        if name is None:
            return "You haven't told me your name in the messages I can see." + suffix
        return f"Your name is {name}." + suffix
    if not earlier_user:  # a recall question
        return "I don't see any earlier messages from you in this conversation." + suffix
    quoted = "; ".join(_quote(t) for t in earlier_user)
    count = _plural(len(earlier_user), "message")
    return f"Earlier you said ({count}): {quoted}." + suffix


def _stated_name(user_texts: Sequence[str]) -> str | None:
    """The latest "my name is X" among ``user_texts``: the first word plus capitalised ones."""
    for text in reversed(user_texts):
        matches = list(_NAME_STATED.finditer(text))
        if not matches:
            continue
        words: list[str] = []
        for raw in matches[-1].group(1).split():
            word = raw.strip(".,!?;:\"'()")
            if not word or (words and not word[0].isupper()):
                break
            words.append(word)
            if len(words) == 3 or raw[-1] in ".,!?;:":
                break
        if words:
            return " ".join(words)
    return None


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) > _QUOTE_LIMIT:
        flat = flat[: _QUOTE_LIMIT - 1].rstrip() + "…"
    return f'"{flat}"'


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


async def stream_local(messages: Sequence[dict[str, Any]],
                       tools: Sequence[dict[str, Any]] = ()) -> AsyncIterator[ModelEvent]:
    """The local model's answer as the events of ``LLMClient.stream``.

    It runs in-process, so it does not go through litellm: litellm's stream wrapper and its
    end-of-stream bookkeeping (rebuilding the whole response, a cost lookup) were two fifths
    of a turn's CPU. Provider calls keep litellm's path."""
    calls = compose_tool_calls(messages, tools)
    if calls:
        for call in calls:
            for piece in _argument_pieces(call):
                yield ToolCallDelta(call.id, call.name, piece)
        for call in calls:
            yield ToolCall(call.id, call.name, call.arguments)
        tokens = sum(_text_tokens(message_text(m.get("content"))) for m in messages)
        yield Finish("tool-calls", Usage(tokens, 0))
        return
    reply = compose_reply(messages)
    for index, piece in enumerate(reply.pieces):
        if reply.fail and index == FAIL_AFTER_PIECES:
            raise _failure()
        if reply.slow:
            await asyncio.sleep(reply.delay_s)
        yield TextDelta(piece)
    if reply.fail:
        raise _failure()
    yield Finish("stop", Usage(reply.input_tokens, reply.output_tokens))


def _argument_pieces(call: LocalToolCall, pieces: int = 3) -> list[str]:
    """A call's arguments in a few pieces, as providers stream them."""
    size = max(1, -(-len(call.arguments) // pieces))
    return [call.arguments[i:i + size] for i in range(0, len(call.arguments), size)] or [""]


def _failure() -> ModelProviderError:
    # What a provider's dropped connection becomes (dev_server.llm.errors), so it is retried alike.
    return ModelProviderError(502, "connection", connection_message(LOCAL_PROVIDER))
