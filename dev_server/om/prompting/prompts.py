"""What the observer and the reflector are told (docs/observational-memory.md#prompts, #reflection).

The observer reads a slice of a thread's history and writes dated, prioritised observations;
the reflector rewrites the whole observation log shorter when it has grown too large. Both
are ordinary model calls: a system prompt from here, then user messages from here.

The prompts say what Mastra's say, element by element (docs/observational-memory.md#prompt-coverage,
checked by tests/test_om_prompt_coverage.py), in our own words, with the structure of Mastra's
(the same sections, in the same order, under the same ``=== ... ===`` headings, with the same
output tags). Their text lives in ``observer_text`` and ``reflector_text``; this module puts
it together. The extraction instructions, output format and guidelines are written once and
quoted by the reflector, so both sides agree on what an observation looks like. Each prompt
opens with a fixed sentence (``OBSERVER_IDENTITY``, ``REFLECTOR_IDENTITY``) by which the
built-in local model (``dev_server.llm.local_observer``) recognises the request; the headings of
the user messages are constants for the same reason.

The reflector is asked to compress harder at each retry: ``COMPRESSION_GUIDANCE`` holds one
section per level (1..4, 0 adds nothing); ``reflection_start_level`` picks the first level
for a model and ``reflection_max_level`` the last.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from dev_server.kernel.prompt_marks import (
    CURRENT_TASK_SECTION,
    HISTORY_HEADING,
    OBSERVER_IDENTITY,
    PRIOR_METADATA_HEADING,
    REFLECT_HEADING,
    REFLECTION_REQUEST,
    REFLECTOR_IDENTITY,
    SHARED_SECTIONS_NOTE,
    SKIP_HINTS_NOTE,
    SUGGESTED_RESPONSE_SECTION,
    TASK_HEADING,
    THREAD_TITLE_SECTION,
)
from dev_server.om.options.extractors import Extractor
from dev_server.om.prompting import observer_text as text
from dev_server.om.prompting import reflector_text as reflection
from dev_server.om.prompting.reflector_text import COMPRESSION_GUIDANCE
from dev_server.om.prompting.transcript import Attachment, attachment_parts

PREVIOUS_OBSERVATIONS_HEADING = "## Previous Observations"
GUIDANCE_HEADING = "## SPECIFIC GUIDANCE"
PRIOR_EXTRACTED_HEADING = "## Prior Extracted Values"
ADDITIONAL_SECTIONS_HEADING = "## Additional Output Sections"

_OBSERVATION_GROUP_TAG = re.compile(r"</?observation-group\b[^>]*>[ \t]*\n?", re.I)
_PRIOR_HINTS = ("current-task", "suggested-response", "thread-title")

_MULTI_THREAD_TASK = """Extract new observations from each thread of the message history in the next message, leaving
out anything the previous observations already say. Inside your <observations> block, write one
<thread id="..."> block per thread, with that thread's id, holding the thread's observations and
its own copy of each optional section your instructions ask for per thread (such as <current-task>
and <suggested-response>), in the format your instructions describe:

<observations>
<thread id="thread-1">
Date: Dec 4, 2025
* 🔴 (14:30) User prefers direct answers
<current-task>Building the export feature</current-task>
<suggested-response>Carry on with the CSV writer</suggested-response>
</thread>
<thread id="thread-2">
Date: Dec 5, 2025
* 🔴 (09:15) User asked about deployment
<current-task>Choosing where to host the service</current-task>
<suggested-response>Compare the two hosts the user named</suggested-response>
</thread>
</observations>"""


def observer_system_prompt(*, instruction: str | None = None, multi_thread: bool = False, current_task: bool = True,
                           suggested_response: bool = True, thread_title: bool = False,
                           extractors: Sequence[Extractor] = (), shared: Collection[str] = ()) -> str:
    """The observer's instructions (docs/observational-memory.md#prompts); the flags switch the optional
    sections on or off, ``extractors`` adds one section per inline extractor (the user's,
    working memory). With ``multi_thread`` the input and output are per ``<thread id>``
    (Mastra's order: the input section before the output format), and the slugs of
    ``shared`` are answered once, not per thread."""
    tags = f"{text.OUTPUT_TAGS_NOTE} {text.MULTI_THREAD_FORMAT_NOTE}" if multi_thread else text.OUTPUT_TAGS_NOTE
    output_format = (f"=== OUTPUT FORMAT ===\n\n{tags}\n\n{text.OUTPUT_FORMAT}\n\n"
                     + _extra_sections(current_task, suggested_response, thread_title, extractors))
    if multi_thread:
        output_format += f"\n\n{text.MULTI_THREAD_OUTPUT}"
        if shared:
            output_format += f"\n\n{SHARED_SECTIONS_NOTE} " + ", ".join(f"<{slug}>" for slug in shared) + "."
    sections = [
        f"{OBSERVER_IDENTITY}\n{text.OBSERVER_OPENING}",
        text.EXTRACTION_INSTRUCTIONS,
        text.MULTI_THREAD_INPUT if multi_thread else "",
        output_format,
        f"=== GUIDELINES ===\n\n{text.GUIDELINES}",
        "" if multi_thread else text.THREAD_ATTRIBUTION,
        # Mastra's closing for several threads names only the current task
        _closing(text.CLOSING, current_task, suggested_response and not multi_thread),
    ]
    return _with_instruction("\n\n".join(s for s in sections if s), instruction)


def observer_messages(transcript: str, *, previous_observations: str | None, prior_current_task: str | None,
                      prior_suggested_response: str | None, prior_thread_title: str | None = None,
                      skip_continuation_hints: bool = False,
                      attachments: Sequence[Attachment | dict[str, Any]] = (),
                      prior_extracted: Sequence[tuple[str, str]] = (),
                      thread_priors: Mapping[str, Sequence[tuple[str, str]]] | None = None) -> list[dict[str, Any]]:
    """The observer's two user messages (docs/observational-memory.md#prompts): the task, then the history to observe.

    ``thread_priors`` (several threads at once, one entry per thread observed): each
    thread's prior values by section id, as (slug, value), shown in a ``<thread id>`` block
    of their own; ``prior_extracted`` are then the values shared by all threads. The task
    then spells out the per-thread output with an example, and the history says how many
    threads it holds.

    ``attachments`` are forwarded with the history: OpenAI content parts (``image_url`` /
    ``file``) as given, and the ``Attachment`` values of ``format_transcript`` as parts when
    their media type is one the observer takes by default (images and PDFs). With any, the
    history message's content becomes a list of parts."""
    history_text = f"{HISTORY_HEADING}\n\n"
    if thread_priors is not None:
        count = len(thread_priors)
        history_text += (f"The messages below come from {count} conversation thread{'' if count == 1 else 's'}, "
                         'each wrapped in a <thread id="..."> tag.\n\n')
    history_text += transcript
    history: str | list[dict[str, Any]] = history_text
    parts = [part for item in attachments
             for part in (attachment_parts([item]) if isinstance(item, Attachment) else [item])]
    if parts:
        history = [{"type": "text", "text": history_text}, *parts]
    # Buffered calls drop the current-task and suggested-response sections, so their prior values are no hint.
    priors = [("current-task", None if skip_continuation_hints else prior_current_task),
              ("suggested-response", None if skip_continuation_hints else prior_suggested_response),
              ("thread-title", prior_thread_title), *prior_extracted]
    if thread_priors is not None:
        priors = list(prior_extracted)
    task = _observer_task(previous_observations, priors, thread_priors, skip_continuation_hints)
    return [{"role": "user", "content": task}, {"role": "user", "content": history}]


def _prior_lines(priors: Sequence[tuple[str, str | None]]) -> list[str]:
    """The prior hints as ``- prior <slug>: value`` lines, then every prior value (hints and
    extractors) echoed as its own section, as Mastra's task shows them."""
    present = [(slug, value.strip()) for slug, value in priors if value and value.strip()]
    return [*(f"- prior {slug}: {value}" for slug, value in present if slug in _PRIOR_HINTS),
            *(_section(slug, value) for slug, value in present)]


def _section(slug: str, value: str) -> str:
    return f"<{slug}>\n{value}\n</{slug}>"


def _observer_task(previous: str | None, priors: Sequence[tuple[str, str | None]],
                   thread_priors: Mapping[str, Sequence[tuple[str, str]]] | None, skip_hints: bool) -> str:
    prompt = ""
    if previous and previous.strip():
        prompt += f"{PREVIOUS_OBSERVATIONS_HEADING}\n\n{previous.strip()}\n\n---\n\n"
        prompt += ("Do not repeat these existing observations: the ones you write now are appended "
                   "after them.\n\n")
    lines = _prior_lines(priors)
    for sid, values in (thread_priors or {}).items():
        if block := _prior_lines(values):
            lines += [f'<thread id="{sid}">', *block, "</thread>"]
    if lines:
        every = [*priors, *(pair for values in (thread_priors or {}).values() for pair in values)]
        slugs = list(dict.fromkeys(slug for slug, value in every if value and value.strip()))
        named = slugs[0] if len(slugs) == 1 else ", ".join(slugs[:-1]) + " and " + slugs[-1]
        prompt += f"{PRIOR_METADATA_HEADING}\n\n" + "\n".join(lines) + "\n\n"
        if thread_priors is None:
            prompt += (f"Treat the prior {named} as hints for continuity, and update them from what the "
                       "new messages say.")
        else:
            prompt += (f"Treat the prior {named} as hints for continuity, each thread's from its own <thread id> "
                       "block, and update them from what that thread's new messages say.")
        prompt += "\n\n---\n\n"
    if thread_priors is not None:
        prompt += f"{TASK_HEADING}\n\n{_MULTI_THREAD_TASK}"
    else:
        prompt += (f"{TASK_HEADING}\n\nExtract new observations from the message history in the next message. "
                   "Leave out anything the previous observations already say, and write what is new in "
                   "the format your instructions describe.")
    if skip_hints:
        prompt += f"\n\n{SKIP_HINTS_NOTE}"
    return prompt


def reflector_system_prompt(*, instruction: str | None = None, extractors: Sequence[Extractor] = (),
                            hints: bool = True) -> str:
    """The reflector's instructions (docs/observational-memory.md#reflection), quoting the observer's so
    both agree on the format. The thread-attribution section is in every one, as in Mastra's;
    without ``hints`` (a background reflection) the current-task and suggested-response
    sections are left out."""
    sections = [
        f"""{REFLECTOR_IDENTITY}
Your reflections will be the ONLY thing the assistant knows about its past with this user.

{reflection.QUOTE_INTRO}

<observational-memory-instruction>
{text.EXTRACTION_INSTRUCTIONS}

=== OUTPUT FORMAT ===

{text.OUTPUT_FORMAT}

=== GUIDELINES ===

{text.GUIDELINES}
</observational-memory-instruction>""",
        reflection.REFLECTOR_ROLE,
        reflection.CONSOLIDATION,
        reflection.THREAD_ATTRIBUTION,
        f"=== OUTPUT FORMAT ===\n\n{reflection.OUTPUT_TAGS_NOTE}\n\n{text.OUTPUT_FORMAT}\n\n"
        + _extra_sections(hints, hints, False, extractors),
        _closing("", hints, hints),
    ]
    return _with_instruction("\n\n".join(sections), instruction)


def reflector_messages(observations: str, *, level: int, guidance: str | None = None,
                       skip_continuation_hints: bool = False, prior_extracted: Sequence[tuple[str, str]] = (),
                       extractors: Sequence[Extractor] = ()) -> list[dict[str, Any]]:
    """The reflector's user message (docs/observational-memory.md#reflection) for compression ``level`` (0..4).
    It lists the optional output sections every time (without the two hints when
    ``skip_continuation_hints``)."""
    if level not in COMPRESSION_GUIDANCE:
        raise ValueError(f"compression level must be 0..4, not {level}")
    stripped = _OBSERVATION_GROUP_TAG.sub("", observations).strip()
    prompt = f"{REFLECT_HEADING}\n\n{stripped}\n\n---\n\n{REFLECTION_REQUEST}"
    if guidance and guidance.strip():
        prompt += f"\n\n{GUIDANCE_HEADING}\n\n{guidance.strip()}"
    if COMPRESSION_GUIDANCE[level]:
        prompt += f"\n\n{COMPRESSION_GUIDANCE[level]}"
    priors = [_section(slug, value.strip()) for slug, value in prior_extracted if value and value.strip()]
    if priors:
        prompt += f"\n\n{PRIOR_EXTRACTED_HEADING}\n\n" + "\n\n".join(priors) + f"\n\n{reflection.PRIOR_VALUES_NOTE}"
    hints = not skip_continuation_hints
    prompt += f"\n\n{ADDITIONAL_SECTIONS_HEADING}\n\n{_extra_sections(hints, hints, False, extractors)}"
    if skip_continuation_hints:
        prompt += f"\n\n{SKIP_HINTS_NOTE}"
    return [{"role": "user", "content": prompt}]


def reflection_start_level(model_id: str) -> int:
    # Gemini 2.5 Flash tends to echo its input at the gentle level, so it starts one higher.
    return 2 if "gemini-2.5-flash" in model_id else 1


def reflection_max_level(start: int) -> int:
    return min(4, start + 3)


def _extra_sections(current_task: bool, suggested_response: bool, thread_title: bool,
                    extractors: Sequence[Extractor] = ()) -> str:
    optional = [section for enabled, section in ((current_task, CURRENT_TASK_SECTION),
                                                 (suggested_response, SUGGESTED_RESPONSE_SECTION),
                                                 (thread_title, THREAD_TITLE_SECTION)) if enabled]
    optional += [f"<{e.slug}>\n{e.instructions}\n</{e.slug}>" for e in extractors if e.inline]
    if not optional:
        return text.NO_OPTIONAL_SECTIONS
    return text.OPTIONAL_SECTIONS_INTRO + "\n\n" + "\n\n".join(optional)


def _closing(first: str, current_task: bool, suggested_response: bool) -> str:
    lines = [first] if first else []
    lines.append(text.CLOSING_USER_MESSAGES)
    if current_task:
        lines.append(text.CLOSING_CURRENT_TASK)
    if suggested_response:
        lines.append(text.CLOSING_SUGGESTED_RESPONSE)
    return "\n".join(lines)


def _with_instruction(prompt: str, instruction: str | None) -> str:
    if instruction and instruction.strip():
        return f"{prompt}\n\n=== CUSTOM INSTRUCTIONS ===\n\n{instruction.strip()}"
    return prompt
