"""What a check compares, taken out of a trace (Mastra's or ours, one shape): a turn's
stream split into steps, the stream's sequence, a part's data, the actor's context and
messages, the observer's transcript, the reflector's input, the record's field groups,
the thread's hints, the stored messages.

Prose that each engine writes in its own words (the OM guidance system messages, the
continuation reminder's wording) is compared by its kind, not its text; data (observations,
hints, transcripts, message texts, token counts, times) is compared exactly.
"""

from __future__ import annotations

import re
from typing import Any

# -- times, to the second ------------------------------------------------------------------
# Both clocks move 1 ms per read (the replay's ManualClock ticks), and the engines read them a
# different number of times: times are compared to the second, durations to the nearest second.

_ISO_MS = re.compile(r"(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d)\.\d{1,3}")
_MS_ATTRIBUTE = re.compile(r'(\w+Ms)="(\d+)"')
_EPOCH_MS_KEYS = frozenset({"timestampMs", "lastActivityAt", "startedAt", "createdAt"})


def _seconds(key: str, ms: int) -> str:
    return f"{ms // 1000 if key in _EPOCH_MS_KEYS else round(ms / 1000)}s"


def coarse(value: Any, key: str = "") -> Any:
    """``value`` with its times to the second: ISO timestamps anywhere in a string lose their
    milliseconds, numbers under a ``...Ms`` key (and epoch times in ms) become seconds."""
    if isinstance(value, str):
        value = _ISO_MS.sub(r"\1", value)
        return _MS_ATTRIBUTE.sub(lambda m: f'{m.group(1)}="{_seconds(m.group(1), int(m.group(2)))}"', value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and (key.endswith("Ms") or (key in _EPOCH_MS_KEYS and value > 10**11)):
        return _seconds(key, int(value))
    if isinstance(value, list):
        return [coarse(v, key) for v in value]
    if isinstance(value, dict):
        return {k: coarse(v, k) for k, v in value.items()}
    return value


IGNORED_PART_KEYS = frozenset({"cycleId", "recordId", "id"})  # random on both sides
CYCLE_PARTS = ("observation-start", "observation-end", "observation-failed", "buffering-start", "buffering-end",
               "buffering-failed", "activation")


def split_steps(events: list[dict[str, Any]]) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    """The turn's events per step (a step ends at its ``step-finish``) and those after the last."""
    steps: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    for event in events:
        if event["type"] in ("start", "finish"):
            continue
        current.append(event)
        if event["type"] == "step-finish":
            steps.append(current)
            current = []
    return steps, current


def sequence(events: list[dict[str, Any]]) -> list[str]:
    """The order of what a step streamed: OM parts (cycle parts with their operation),
    signals, the step's start, its text, its tool calls and results."""
    out: list[str] = []
    for event in events:
        kind = event["type"]
        if kind.startswith("data-om-"):
            name = kind.removeprefix("data-om-")
            data = event.get("data") or {}
            label = f"om:{name}({data['operationType']})" if name in CYCLE_PARTS and "operationType" in data \
                else f"om:{name}"
        elif kind.startswith("data-"):
            label = kind.removeprefix("data-")
        elif kind in ("tool-call", "tool-result", "tool-error"):
            label = f"{kind}:{event.get('toolName')}"
        elif kind == "step-finish":
            continue
        else:
            label = kind
        if not (label == "text" and out and out[-1] == "text"):
            out.append(label)
    return out


def part_data(event: dict[str, Any]) -> Any:
    data = event.get("data")
    return {k: v for k, v in data.items() if k not in IGNORED_PART_KEYS} if isinstance(data, dict) else data


def data_parts(events: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The step's data parts by type, in order."""
    out: dict[str, list[Any]] = {}
    for event in events:
        if event["type"].startswith("data-"):
            out.setdefault(event["type"], []).append(part_data(event))
    return out


# -- what the actor receives ----------------------------------------------------------------

_EXTRACTED = re.compile(r"^<([a-z][a-z0-9-]*)>\n.*\n</\1>$", re.S)
_OTHER = re.compile(r'<other-conversation id="([^"]+)"')


def actor_context(prompt: list[dict[str, Any]]) -> list[Any]:
    """The system messages: the agent's instructions and data as they are, OM's guidance by
    kind (whether it carries the recall instructions, which other conversations it shows)."""
    out: list[Any] = []
    inside_observations = False
    for index, message in enumerate(m for m in prompt if m["role"] == "system"):
        text = message["content"]
        if index == 0:
            out.append(["instructions", text])
        elif text == "<observations>":
            inside_observations = True
            out.append(["observations"])
        elif text.startswith(("<current-task>", "<suggested-response>")) or _EXTRACTED.match(text):
            inside_observations = False
            out.append(["hint", text])
        elif inside_observations:
            out.append(["observation-chunk", text])
        else:
            out.append(["guidance", {"recall": "recall" in text.lower(), "others": _OTHER.findall(text)}])
    return out


def _content_text(part: dict[str, Any]) -> Any:
    output = part.get("output")
    return output.get("value") if isinstance(output, dict) and "value" in output else output


def actor_messages(prompt: list[dict[str, Any]]) -> list[Any]:
    """The conversation the actor sees, part by part: roles and texts, files, tool calls
    and results; the continuation reminder by kind, a temporal-gap reminder as it is."""
    out: list[Any] = []
    for message in prompt:
        if message["role"] == "system":
            continue
        for part in message["content"]:
            kind = part["type"]
            if kind == "text":
                text = part["text"]
                if text.startswith("<system-reminder>"):
                    out.append(["reminder"])
                else:
                    out.append([message["role"], text])
            elif kind == "file":
                out.append([message["role"], "file", part.get("mediaType"), part.get("bytes")])
            elif kind == "tool-call":
                out.append(["tool-call", part.get("toolName"), part.get("input")])
            elif kind == "tool-result":
                out.append(["tool-result", part.get("toolName"), _content_text(part)])
            else:
                out.append([message["role"], kind])
    return out


# -- what the observer and the reflector receive ------------------------------------------------

_HISTORY = "## New Message History to Observe"
_REFLECT = re.compile(r"## OBSERVATIONS TO REFLECT ON\s*\n(.*?)\n\s*---", re.S)


def _texts(message: dict[str, Any]) -> list[str]:
    return [p["text"] for p in message["content"] if p["type"] == "text"] if isinstance(message["content"], list) \
        else [message["content"]]


def observer_transcript(call: dict[str, Any]) -> dict[str, Any]:
    """The transcript the observer was given (line by line) and the files sent with it."""
    for message in call["input"]:
        texts = _texts(message)
        if any(_HISTORY in t for t in texts):
            joined = "\n".join(texts).split(_HISTORY, 1)[1]
            files = [p.get("mediaType") for p in message["content"] if isinstance(p, dict) and p["type"] == "file"] \
                if isinstance(message["content"], list) else []
            return {"lines": [line.strip() for line in joined.splitlines() if line.strip()], "files": files}
    return {"lines": None, "files": None}


def reflector_input(call: dict[str, Any]) -> str | None:
    """The observations the reflector was asked to reflect on."""
    for message in call["input"]:
        found = _REFLECT.search("\n".join(_texts(message)))
        if found:
            return found.group(1).strip()
    return None


# -- the record, the thread, the stored messages ----------------------------------------------

RECORD_GROUPS = {
    "generation": ("generationCount", "originType"),
    "observations": ("activeObservations",),
    "tokens": ("observationTokenCount", "totalTokensObserved", "pendingMessageTokens"),
    "buffered": ("bufferedObservationChunks", "bufferedReflection", "bufferedReflectionTokens",
                 "bufferedReflectionInputTokens", "reflectedObservationLineCount"),
    "cursors": ("lastObservedAt", "observedMessageIds", "lastBufferedAtTokens", "lastBufferedAtTime"),
}


def _empty_as_none(value: Any) -> Any:
    return None if value in ("", [], {}) else value


def record_group(record: dict[str, Any] | None, group: str) -> Any:
    if record is None:
        return None
    return {field: _empty_as_none(record.get(field)) for field in RECORD_GROUPS[group]}


HINTS = ("currentTask", "suggestedResponse", "threadTitle", "extracted")


def thread_hints(thread: dict[str, Any]) -> dict[str, Any]:
    om = thread.get("om") or {}
    return {"title": thread.get("title") or None, **{key: _empty_as_none(om.get(key)) for key in HINTS}}


def thread_keys(thread: dict[str, Any]) -> list[str]:
    return sorted((thread.get("om") or {}).keys())


def stored_by_id(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in messages}


def stored_parts(message: dict[str, Any] | None) -> Any:
    """A stored message as kept (role, parts, whether it is sealed); None when absent."""
    return None if message is None else [message["role"], message["parts"], bool(message.get("sealed"))]


def stored_time(message: dict[str, Any] | None) -> Any:
    return None if message is None else message["createdAt"]
