"""Ids that differ from run to run, made comparable: the rules of the recorder's
``labels.mjs`` and ``determinism.mjs``, for our gateway.

A stored message's id becomes its label (``t3:assistant0``: the first assistant message
first stored in turn 3; a scripted user message keeps its own id); any other UUID becomes
``<id>``; random cycle and group ids lose their random part.

UUIDs are drawn from a seeded sequence whose bytes are all 0xa0-0xff, so no segment is
all digits: tokenx counts an all-digit segment as one token and a mixed one by its length,
and ids in a tool result or an observation group's range cost the same tokens as in the
recording.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from unittest import mock

from dev_server.kernel import ids as gateway_ids

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_CYCLE = re.compile(r"\b(buffer-obs|reflect-buf|reflect-act)-\d+-[a-z0-9]+")
_GROUP = re.compile(r'(["`])[0-9a-f]{16}\1')


class Labels:
    """Message ids to labels, in the order the messages were first stored."""

    def __init__(self, scripted: Iterable[str]) -> None:
        self.scripted = set(scripted)
        self.by_id: dict[str, str] = {}

    def add_stored(self, turn: int, messages: Iterable[Mapping[str, Any]]) -> None:
        """Label the messages not seen before (``messages`` in stored order)."""
        fresh: dict[str, int] = {}
        for message in messages:
            message_id = message["id"]
            if message_id in self.by_id:
                continue
            if message_id in self.scripted:
                self.by_id[message_id] = message_id
                continue
            role = message["role"] if message["role"] in ("user", "assistant", "system", "tool", "signal") else "other"
            self.by_id[message_id] = f"t{turn}:{role}{fresh.get(role, 0)}"
            fresh[role] = fresh.get(role, 0) + 1

    def relabel(self, value: Any) -> Any:
        ids = sorted(self.by_id.items(), key=lambda item: -len(item[0]))  # no id is cut by a shorter one

        def text(s: str) -> str:
            for message_id, label in ids:
                if message_id != label and message_id in s:
                    s = s.replace(message_id, label)
            s = _UUID.sub("<id>", s)
            s = _CYCLE.sub(r"\1-<id>", s)
            return _GROUP.sub(r"\1<group>\1", s)

        def walk(v: Any) -> Any:
            if isinstance(v, str):
                return text(v)
            if isinstance(v, list):
                return [walk(x) for x in v]
            if isinstance(v, dict):
                return {k: walk(x) for k, x in v.items()}
            return v

        return walk(value)


def _seed(name: str) -> int:
    value = 2166136261
    for char in name:
        value = ((value ^ ord(char)) * 16777619) & 0xFFFFFFFF
    return value


@contextmanager
def steady_uuids(name: str) -> Iterator[None]:
    """``uuid.uuid4`` and ``dev_server.kernel.ids.uuid4`` draw from a sequence seeded by
    ``name``, every byte 0xa0-0xff (the version and variant nibbles set as a v4 UUID's)."""
    draw = random.Random(_seed(name))

    def uuid4() -> uuid.UUID:
        raw = bytearray(0xA0 + draw.randrange(96) for _ in range(16))
        raw[6] = 0x40 | (raw[6] & 0x0F)
        raw[8] = 0xA0 | (raw[8] & 0x0F)
        return uuid.UUID(bytes=bytes(raw))

    # the gateway draws its ids from dev_server.kernel.ids (a pool of random bytes), libraries from uuid
    with mock.patch("uuid.uuid4", uuid4), mock.patch.object(gateway_ids, "uuid4", uuid4):
        yield
