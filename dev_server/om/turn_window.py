"""What Observational Memory shows the model in one turn, carried from step to step.

Mastra decides at every step of a turn on the step's messages: the thread's unobserved
messages and the reply so far (docs/observational-memory.md#decision-order). Reading and
counting the whole thread again at each step would cost what the thread costs, not what
changed; ``TurnWindow`` keeps the first step's reading instead and follows the changes:

* ``messages``: the stored messages the model sees, oldest first, each counted once when it
  enters (``tokens``). ``observed`` holds those of them that an observation or activation
  covered but that stay in view (the turn's input, the retention floor): they are shown and
  no longer pending, as Mastra's status counts them.
* the reply so far (``StepContext.reply``): counted part by part as it grows
  (``dev_server.om.tokens.counting.PartsTally``), built as a message only when a decision
  needs it (``draft``). When it is split off (``ReplySoFar.split``: it was observed or
  handed to the background observer) it becomes a stored message of the window.
* ``head``: a reply the turn continues (a client tool's output came back): its stored copy
  is shown as history but counted as the reply so far, whose parts it already holds.

``pending`` is what the status reports and the thresholds compare: the unobserved messages
and the reply so far, as ``count_messages`` would count them. ``history`` is rebuilt only
when the window changed.

From turn to turn, ``Carried`` keeps each stored message's count and model messages with
the thread's window (``ConversationStore.window_since``: dropped when the message changes),
so a turn counts and converts only the messages that are new or changed since the last one;
and while the record is as it was (no cycle moved its cursor or observed ids) and the
thread's messages were only added to, the next turn's window starts from this one's, with
only the new messages filtered, counted and converted (``Carried.window``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from dev_server.kernel.convert import stored_to_model_all
from dev_server.kernel.messages import Message
from dev_server.kernel.processors import ReplySoFar
from dev_server.om.engine.window import drop_observed, unobserved
from dev_server.om.prompting.context import continuation_model_message
from dev_server.om.tokens.counting import TOKENS_PER_CONVERSATION, PartsTally, count_message, memo_key
from dev_server.storage.om_records import OMRecord

_START = "om-turn-start"  # the derived key of the last turn's starting window


@dataclass(frozen=True)
class _Start:
    """A turn's window as its first step built it, before any decision changed it."""

    record: tuple[Any, ...]  # what of the record decided which messages are unobserved
    stored: list[Message]  # the thread's messages it was made from
    messages: list[Message]
    tokens: dict[str, int]
    unobserved_tokens: int
    models: list[dict[str, Any]]


def _record_key(record: OMRecord) -> tuple[Any, ...]:
    # observed ids only grow within a generation: the same count is the same set
    return record.id, record.last_observed_at, len(record.observed_message_ids or ())


class Carried:
    """A stored message's count and model messages, carried from turn to turn in the thread's
    ``derived`` values (by ``seq``, with the digest of the stored JSON they were made from).
    A virtual copy (``window.unobserved``: no digest) is counted and converted afresh. The
    turn's ``memo`` gets each count too, for its later decisions' ``count_messages``."""

    def __init__(self, derived: dict[int, Any], memo: dict[Any, int]) -> None:
        self.derived = derived
        self.memo = memo

    def _entry(self, message: Message) -> list[Any] | None:
        if message.stored_digest is None or message.seq is None:
            return None
        entry = self.derived.get(message.seq)
        if entry is None or entry[0] != message.stored_digest:
            entry = self.derived[message.seq] = [message.stored_digest, None, None]
        return entry

    def count(self, message: Message) -> int:
        entry = self._entry(message)
        if entry is None:
            return count_message(message, memo=self.memo)
        if entry[1] is None:
            entry[1] = count_message(message, memo=self.memo)
        else:
            self.memo[memo_key(message)] = entry[1]
        return entry[1]

    def count_all(self, messages: Collection[Message]) -> int:
        """``count_messages`` of ``messages``, each counted as ``count`` counts it."""
        return TOKENS_PER_CONVERSATION + sum(map(self.count, messages)) if messages else 0

    def window(self, stored: list[Message], record: OMRecord, reply: ReplySoFar | None) -> TurnWindow:
        """The turn's window of ``stored`` (the thread's messages from the cursor on): the last
        turn's start with the messages added since, when the record is as it was then and
        ``stored`` still begins with the very messages it was made from; else built afresh."""
        key = _record_key(record)
        last = self.derived.get(_START)  # type: ignore[call-overload]
        if (last is not None and last.record == key and len(stored) >= len(last.stored)
                and all(map(operator.is_, last.stored, stored))):
            window = TurnWindow((), self.count, reply, convert=self.model_messages)
            window.resume(last.messages, last.tokens, last.unobserved_tokens, last.models)
            for message in unobserved(stored[len(last.stored):], record):
                window.add(message)
        else:
            window = TurnWindow(unobserved(stored, record), self.count, reply, convert=self.model_messages)
        self.derived[_START] = _Start(key, stored, list(window.messages), dict(window.tokens),  # type: ignore[index]
                                      window.unobserved_tokens, list(window.models or ()))
        return window

    def model_messages(self, message: Message) -> list[dict[str, Any]]:
        """``stored_to_model_all``, converted once per stored message. Shared, not copied: nothing
        here changes a model message in place, and the provider call gets copies
        (``dev_server.llm.content.fit_to_model``)."""
        entry = self._entry(message)
        if entry is None:
            return stored_to_model_all(message)
        if entry[2] is None:
            entry[2] = stored_to_model_all(message)
        return entry[2]


class TurnWindow:
    def __init__(self, messages: Iterable[Message], count: Callable[[Message], int],
                 reply: ReplySoFar | None = None,
                 convert: Callable[[Message], list[dict[str, Any]]] = stored_to_model_all) -> None:
        self.count = count
        self.convert = convert
        self.messages: list[Message] = []
        self.tokens: dict[str, int] = {}
        self.observed: set[str] = set()
        self.unobserved_tokens = 0  # the window's unobserved messages, each counted alone
        self.unobserved_count = 0
        self.reply = reply
        self.tally = PartsTally()
        self.reply_tokens = 0
        self.head: Message | None = None
        self._draft: Message | None = None
        self.changed = True  # ``history`` must be built again
        self.models: list[dict[str, Any]] | None = []  # model messages of ``messages`` while they are all added
        for message in messages:
            self.add(message)

    def resume(self, messages: list[Message], tokens: dict[str, int], unobserved_tokens: int,
               models: list[dict[str, Any]]) -> None:
        """Start from another turn's starting window (``Carried.window``), copied."""
        self.messages, self.tokens, self.models = list(messages), dict(tokens), list(models)
        self.unobserved_tokens, self.unobserved_count = unobserved_tokens, len(messages)

    def add(self, message: Message) -> None:
        """A stored message joins the window (counted, and converted for the model)."""
        self._add(message, self.count(message))
        if self.models is not None:
            self.models.extend(self.convert(message))

    # -- the step's messages -----------------------------------------------------------

    def read_reply(self, *, first: bool) -> None:
        """The reply so far, as this step finds it (before the step's model call). On the
        turn's ``first`` step there is one only when the turn continues a stored reply."""
        self._draft = None
        parts = self.reply.parts if self.reply is not None else ()
        if not parts:
            self.reply_tokens = 0
            return
        if first:
            draft = self.draft()
            if draft is not None and draft.id in self.tokens:  # a continued reply: its stored copy was loaded
                self.head = next(m for m in self.messages if m.id == draft.id)
                self.remove({draft.id})
        self.reply_tokens = self.tally.update(parts)

    def draft(self) -> Message | None:
        """The reply so far as a message (built once per step, when a decision needs it)."""
        if self._draft is None and self.reply is not None and self.reply.parts:
            self._draft = self.reply.message()
        return self._draft

    def unobserved(self) -> list[Message]:
        """The step's unobserved messages: the window's, then the reply so far."""
        found = [m for m in self.messages if m.id not in self.observed]
        draft = self.draft() if self.reply_tokens else None
        return [*found, draft] if draft is not None else found

    def newest(self) -> list[Message]:
        """The newest message the model sees (a list of at most one)."""
        draft = self.draft() if self.reply_tokens else None
        newest = draft or self.head or (self.messages[-1] if self.messages else None)
        return [newest] if newest is not None else []

    @property
    def pending(self) -> int:
        if not self.unobserved_count and not self.reply_tokens:
            return 0
        return TOKENS_PER_CONVERSATION + self.unobserved_tokens + self.reply_tokens

    @property
    def shown(self) -> int:
        """Tokens of everything the model sees of the conversation (the retention floor's measure)."""
        if not self.messages and not self.reply_tokens:
            return 0
        return TOKENS_PER_CONVERSATION + sum(self.tokens.values()) + self.reply_tokens

    # -- what the decisions change -----------------------------------------------------

    def split_off(self, message: Message) -> None:
        """The reply so far was stored as ``message`` (``ReplySoFar.split``): it joins the
        window counted as stored (sealed: a ``step-start`` last part counts its ``sealedAt``),
        and the reply starts over."""
        if self.head is not None:  # its stored copy is part of the message now
            self.changed, self.head = True, None
        self._add(message, self.count(message))
        self.models = None  # the reply so far was not among them: built again from the messages
        self.tally, self.reply_tokens, self._draft = PartsTally(), 0, None

    def remove(self, ids: Collection[str]) -> None:
        """``ids`` leave the window (activated, or superseded)."""
        kept = []
        for message in self.messages:
            if message.id not in ids:
                kept.append(message)
                continue
            tokens = self.tokens.pop(message.id)
            self.models = None
            if message.id in self.observed:
                self.observed.discard(message.id)
            else:
                self.unobserved_tokens -= tokens
                self.unobserved_count -= 1
            self.changed = True
        self.messages = kept

    def mark_observed(self, ids: Collection[str]) -> None:
        for message in self.messages:
            if message.id in ids and message.id not in self.observed:
                self.observed.add(message.id)
                self.unobserved_tokens -= self.tokens[message.id]
                self.unobserved_count -= 1

    def refilter(self, record: OMRecord) -> None:
        """Another cycle may have observed some of the window meanwhile (the record was read again)."""
        still = {m.id for m in unobserved(self.messages, record)}
        self.mark_observed({m.id for m in self.messages if m.id not in still})

    def drop_observed(self, ids: Collection[str], *, floor: int, preserve: Collection[str]) -> None:
        """After an observation or an activation: ``ids`` are observed, and observed messages
        leave the window oldest first while what stays is at least ``floor`` tokens;
        ``preserve`` (the turn's input, on its first step) always stays."""
        self.mark_observed(ids)
        kept = drop_observed(self.messages, self.observed, floor=floor, preserve=preserve,
                             count=lambda m: self.tokens[m.id], total=self.shown)
        if len(kept) != len(self.messages):
            self.remove({m.id for m in self.messages} - {m.id for m in kept})

    def _add(self, message: Message, tokens: int) -> None:
        self.messages.append(message)
        self.tokens[message.id] = tokens
        self.unobserved_tokens += tokens
        self.unobserved_count += 1
        self.changed = True

    # -- what the model sees -----------------------------------------------------------

    def history(self, with_continuation: bool) -> list[dict[str, Any]]:
        """The conversation's model messages: the continuation reminder first when the log
        is not empty, the window, a continued reply's stored copy (the reply so far is the
        loop's ``progress`` until it is split off)."""
        self.changed = False
        if self.models is not None and self.head is None:
            # not copied: nothing here changes a model message, and the provider call gets copies
            # (``dev_server.llm.content.fit_to_model``)
            history = list(self.models)
        else:
            shown = [*self.messages, self.head] if self.head is not None else self.messages
            history = [model for message in shown for model in self.convert(message)]
        return [continuation_model_message(), *history] if with_continuation else history
