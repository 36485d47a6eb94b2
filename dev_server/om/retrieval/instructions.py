"""What the actor is told about its observation groups and the ``recall`` tool (docs/observational-memory.md#retrieval,
``getRetrievalInstructions``), appended to the observation instructions (docs/observational-memory.md#context) when
``retrieval`` is on.

The text depends on the retrieval scope (one thread, or all of the user's threads) and on
the kind of search (by meaning with ``vector: true``, else by keyword); an application's
own ``instructions`` come last, under "### Additional recall guidance". It is ours, not a
copy of Mastra's: the same ground, in our words.
"""

from __future__ import annotations

from functools import lru_cache

from dev_server.om.options.config import RetrievalConfig

ADDITIONAL_GUIDANCE_HEADING = "### Additional recall guidance"

_INTRO = """\
## Recall: reading the original messages

Your observations are a condensed memory. Parts of it are observation groups: each is shown \
as a heading like ## Group `3f9a0c1d2e4b5a69` followed by a line like _range: `startId:endId`_ \
(in raw form, `<observation-group id="..." range="startId:endId">`). The range names the first and the \
last of the original messages the group was written from. Those messages are still stored, \
and the **recall** tool reads them back."""

_WHEN = """\
### When to recall
- The user wants something repeated, shown or reproduced from earlier in the conversation.
- The user needs exact content: code, quotes, error messages, URLs, file paths, names, numbers.
- An observation mentions something but lacks the detail the answer needs.
- You want to check or expand an observation before relying on it.{other}

When the user refers to specific earlier content, recall it rather than answering from the \
gist: observations keep the meaning, not the wording."""

_OTHER_CONVERSATION = """
- The user refers to another conversation that your observations do not cover; their other \
threads may hold it even when you have no observations about it."""

_MODES_RESOURCE = """\
### Choosing a mode
Recall reaches all of this user's conversation threads, not only the current one.
- `mode: "search"` with a `query`: find where something was said when you do not know the \
thread. {search_kind} Each result names its thread, the message range and the observation \
group it belongs to; use a message id from it as a `cursor`.
- `mode: "messages"` (the default): read messages, from a `cursor` (a message id from a \
range or a search result), or a whole thread with `threadId` (`"current"` for this one).
- `mode: "threads"`: list the user's threads (ids, titles, dates; this one is marked \
`← current`), `page` by page, optionally narrowed with `before`/`after` (dates).

If search finds nothing useful, do not conclude the information is gone: recent or short \
conversations may have no observations yet. List the threads, pick candidates by title and \
date, and read them with `mode: "messages"`."""

_MODES_THREAD = """\
### Choosing a mode
Recall is limited to the current conversation thread.
- `mode: "messages"` (the default): read this thread's messages from a `cursor`, or from \
its start (`anchor: "start"`) or its end (`anchor: "end"`) without one.
- `mode: "search"` with a `query`: find messages of this thread. {search_kind}
- `mode: "threads"`: only shows this thread's id, title and dates."""

_SEARCH_KINDS = {True: "It matches by meaning.",
                 False: "It matches the words of the query (keywords, not meaning): use distinctive words."}

_PAGING = """\
### Paging from a cursor
A range is `startId:endId`: pass ONE of the two ids as `cursor`, never the whole range.
1. Pick the group that fits the question and take the start or end id of its range.
2. Call recall with that id as `cursor`; `page: 1` (the default) reads forward from it, \
`page: -1` backward.
3. Not there yet? Go on with `page: 2`, `3`, ... (or `-2`, `-3`, ...).
4. `hasNextPage` and `hasPrevPage` in the result tell you whether more exists each way.
`limit` sets how many messages a page holds (at most 20)."""

_DETAIL = """\
### Detail
Results are **low** detail by default: each message shows its id, time and role, and each \
of its parts a position `[p0]`, `[p1]`, ... with its text cut short and tool calls \
summarised. `partType` (text, tool-call, tool-result, reasoning, image, file) and \
`toolName` keep only the parts you want.
- `detail: "high"` returns one part at a time, in full (tool arguments and results \
included), and says how to reach the next part or message.
- `cursor` + `partIndex` returns exactly that part of that message in full.
A result marked `truncated: true` was cut to fit its size budget: page on, or fetch the \
part you need with `partIndex`."""

_TRUNCATION = """\
### Following truncation hints
A part cut short at low detail ends with a hint such as \
`[recall cursor="<id>" partIndex=2 detail="high" for more]`. When you need that content, \
make exactly the call the hint describes; scanning at low detail and then opening the parts \
that matter is the normal way to use recall. Do not answer from the cut text when the user \
asked for the exact content.

A single part can be larger than one result: the `partIndex` result then says \
`truncated: true` and gives `nextCharOffset`. Repeat the same call with `charOffset` set to \
exactly that number to read on, and keep going until no `nextCharOffset` comes back. Calling \
again without `charOffset` returns the beginning again."""

_NOT_NEEDED = """\
### When recall is not needed
- A high-level summary is asked for and your observations already give it.
- The question is general knowledge or a general preference, with no need for source text.
- {no_source}

The ranges and the recall tool let you go back to what was actually said whenever your \
memory of it is vague."""

_NO_SOURCE = {
    "resource": "Nothing in your observations fits AND search and the thread list found nothing. Messages "
                "without observations may still exist, so look before you say something is unknown.",
    "thread": "No observation group of this thread relates to the question.",
}


@lru_cache(maxsize=16)
def retrieval_instructions(config: RetrievalConfig) -> str:
    """The retrieval instructions for ``config`` (custom guidance last)."""
    resource = config.scope == "resource"
    search_kind = _SEARCH_KINDS[config.vector]
    modes = (_MODES_RESOURCE if resource else _MODES_THREAD).format(search_kind=search_kind)
    sections = [_INTRO, _WHEN.format(other=_OTHER_CONVERSATION if resource else ""), modes, _PAGING, _DETAIL,
                _TRUNCATION, _NOT_NEEDED.format(no_source=_NO_SOURCE[config.scope])]
    if config.instructions and config.instructions.strip():
        sections.append(f"{ADDITIONAL_GUIDANCE_HEADING}\n{config.instructions.strip()}")
    return "\n\n".join(sections)
