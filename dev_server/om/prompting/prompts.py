"""What the observer and the reflector are told (docs/observational-memory.md#prompts, #reflection).

The observer reads a slice of a thread's history and writes dated, prioritised observations;
the reflector rewrites the whole observation log shorter when it has grown too large. Both
are ordinary model calls: a system prompt from here, then user messages from here.

The system prompts follow the structure of Mastra's (the same sections, in the same order,
under the same ``=== ... ===`` headings, with the same output tags) in our own words. The
extraction instructions, output format and guidelines are written once and quoted by the
reflector, so both sides agree on what an observation looks like. Each prompt opens with a
fixed sentence (``OBSERVER_IDENTITY``, ``REFLECTOR_IDENTITY``) by which the built-in local
model (``dev_server.llm.local_observer``) recognises the request; the headings of the user messages
are constants for the same reason.

The reflector is asked to compress harder at each retry: ``COMPRESSION_GUIDANCE`` holds one
section per level (1..4, 0 adds nothing); ``reflection_start_level`` picks the first level
for a model and ``reflection_max_level`` the last.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from dev_server.kernel.prompt_marks import (
    COMPRESSION_HEADINGS,
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
from dev_server.om.options.extractors import output_sections as extractor_sections
from dev_server.om.prompting.transcript import Attachment, attachment_parts

PREVIOUS_OBSERVATIONS_HEADING = "## Previous Observations"
GUIDANCE_HEADING = "## SPECIFIC GUIDANCE"
PRIOR_EXTRACTED_HEADING = "## Prior Extracted Values"
ADDITIONAL_SECTIONS_HEADING = "## Additional Output Sections"

EXTRACTION_INSTRUCTIONS = """1. ASSERTIONS, QUESTIONS AND INTENTIONS ARE DIFFERENT THINGS
When the user tells you something about themselves or their world, record it as an assertion:
"I have two kids" becomes "🔴 (14:30) User stated they have two kids".
When the user asks for something, record it as a question: "User asked how to fix the build".
When the user says what they plan to do, record it as an intention: "User intends to move in March".
A question never cancels an earlier assertion: the answer is usually in what they told you.

2. CHANGES OF STATE SAY WHAT THEY REPLACE
"User switched the project to Postgres (replacing SQLite)". What the user asserts about their own
life is authoritative, even when it contradicts something said before; record the newer fact.

3. ANCHOR EVERY OBSERVATION IN TIME
Start each observation with the time of the message it comes from, as (HH:MM) on a 24-hour clock.
When the message mentions a relative date you can resolve to a real date ("next Friday", "in two
weeks", "last Tuesday"), add "(meaning <date>)" or, when unsure, "(estimated <date>)" at the END of
the line. Do not do this for vague words such as "recently", "soon" or "lately". When one message
mentions several events with different dates, write one line per event, each with its own date.

4. KEEP THE USER'S WORDS AND USE PRECISE VERBS
Quote unusual or distinctive phrasing. Say what happened exactly: "subscribed", "purchased",
"returned", "cancelled", not "got" or "did something with".

5. KEEP WHAT DISTINGUISHES THINGS
When the assistant produced a list, names, recommendations or creative work, keep what tells the
items apart (titles, key attributes, the order chosen). Keep names, handles, numbers, quantities,
prices, measurements and who plays which role.

6. KEEP THE CONTEXT OF THE CONVERSATION
Who, what, where and when; code snippets the work depends on; text written together with the user,
word for word when it matters; decisions and the reasons given for them.

7. CAPTURE USER MESSAGES ALMOST VERBATIM
A short user message is recorded nearly as written; a long one keeps its specific requests,
constraints and examples.

8. DO NOT REPEAT YOURSELF
When a tool is used again and again for one purpose, write one parent line and put the individual
steps under it as "* -> ..." sub-bullets, instead of one full line per call.

9. NOTE WHAT COMES NEXT
Record next steps, open questions and promises. A next step the user has not approved yet is
marked "waiting for user".

10. TRACK COMPLETION WITH ✅
Mark something ✅ when it is actually finished: a question fully answered, a task done, a problem
solved and confirmed. Do not use ✅ for attempts, partial progress or plans. Write it as a sub-bullet
under the work it completes, or as its own line when it stands alone:
* 🔴 (10:02) User asked to rename the config module
  * ✅ (10:09) Renamed config.py to settings.py; tests pass"""

OUTPUT_FORMAT = """Priorities, one emoji at the start of every observation:
- 🔴 high: facts about the user, their preferences, goals that are not yet reached, critical context
- 🟡 medium: project details, tool results, things learned along the way
- 🟢 low: small details, passing remarks
- ✅ completed: a finished task or an answered question (see above)

Related observations are grouped by indentation:
* 🔴 (09:15) User is preparing a talk for a conference on 12 May (meaning May 12, 2026)
  * -> 🟡 (09:16) Talk is 25 minutes long, audience are backend engineers
  * -> 🟡 (09:20) Assistant drafted an outline with five sections

Group the observations by date, and give each one its time on a 24-hour clock:

<observations>
Date: Dec 4, 2025
* 🔴 (14:30) User stated they have two kids, aged 4 and 7
* 🟡 (14:32) User asked for weekend activities suitable for both children
* 🟢 (14:35) Assistant suggested a science museum and a climbing park
</observations>"""

GUIDELINES = """- Be specific: "User wants the report as a PDF by Friday (meaning Dec 12, 2025)" beats
  "User wants a report".
- Write one to five observations per exchange; more only when a message is dense with facts.
- Use terse language: drop filler words, keep the meaning.
- Do not repeat anything already in the previous observations.
- Observe tool calls: what was called, why, and what was learned from the result.
- Keep file paths and line numbers when the work is about code.
- Start every observation line with a priority emoji.
- Use ✅ only for things that are really done."""

_THREAD_ATTRIBUTION = """=== IMPORTANT: THREAD ATTRIBUTION ===

All the messages you observe belong to one conversation. Do not write thread ids, and do not
wrap anything in <thread> tags."""

_MULTI_THREAD_INPUT = """=== MULTI-THREAD INPUT ===

The history you observe comes from several conversations with the same user, each one wrapped in
<thread id="..."> tags. Keep them apart in your output: inside one <observations> block, write one
<thread id="..."> block per conversation, using the same id, holding that conversation's dated
observations and its own copy of every optional section listed above (task, response, title,
extracted values), each about that conversation only:

<observations>
<thread id="thread-a">
Date: Dec 4, 2025
* 🔴 (14:30) User prefers short answers
<current-task>Choosing a database</current-task>
<suggested-response>Compare the two options the user named</suggested-response>
</thread>
<thread id="thread-b">
Date: Dec 5, 2025
* 🟡 (09:10) User asked how to deploy the service
<current-task>Deployment</current-task>
<suggested-response>Explain the deployment steps</suggested-response>
</thread>
</observations>"""

_RESOURCE_SCOPE_REFLECTION = """=== THREAD ATTRIBUTION (RESOURCE SCOPE) ===

When the observations contain <thread id="..."> sections:
- keep the attribution of what belongs to one conversation (its tasks, its local decisions);
- merge facts that hold everywhere (who the user is, lasting preferences) into lines outside any thread;
- keep the attribution of recent, conversation-specific observations.

Input:
<thread id="thread-a">
Date: Dec 4, 2025
* 🔴 (14:30) User prefers TypeScript
* 🟡 (14:35) Working on the login form
</thread>
<thread id="thread-b">
Date: Dec 4, 2025
* 🔴 (15:00) User prefers TypeScript
* 🟡 (15:05) Debugging the orders endpoint
</thread>

Output:
Date: Dec 4, 2025
* 🔴 (14:30) User prefers TypeScript
<thread id="thread-a">
* 🟡 (14:35) Working on the login form
</thread>
<thread id="thread-b">
* 🟡 (15:05) Debugging the orders endpoint
</thread>"""

_COMPRESSION_BODIES: dict[int, str] = {
    1: """Your last reflection was not smaller than the observations it replaced. Compress a little more:
- near the start, fold groups of observations into higher-level statements;
- near the end, keep the fine detail: recent context matters most;
- write in a more condensed style throughout;
- merge related items, but keep the specific names, places, events and people;
- a long run of similar tool calls becomes one line: what was tried, how often, and the outcome.

Your last reflection kept detail at 10/10. Aim for 8/10.""",
    2: """Your reflection is still too large. Compress much harder:
- near the start, reduce observations to short high-level summaries;
- near the end, keep the important detail;
- use a markedly more condensed style everywhere;
- merge related and overlapping items, and remove what is redundant;
- keep the specific names, places, events and people;
- a long run of similar tool calls becomes one line with its outcome.

Your last reflection kept detail at 10/10. Aim for 6/10.""",
    3: """Several attempts have not compressed enough. Compress as far as you can:
- summarise the oldest 50-70% of the observations into brief paragraphs: key facts, decisions and outcomes only;
- for the newest 30-50%, keep what matters in a condensed style;
- if ten observations are about one topic, make them one or two lines;
- drop procedure (tool calls, retries, intermediate steps) and keep only results;
- drop what is no longer relevant or has been superseded;
- keep names, dates, decisions, errors, user preferences and design choices.

Your last reflection kept detail at 10/10. Aim for 4/10.""",
    4: """Every attempt so far has been too large. This is the last level; compress to the bare essentials:
- collapse every sequence of tool calls into its final outcome;
- keep at most two or three date groups per day;
- summarise everything but the newest observations into a few short paragraphs;
- keep only what the assistant cannot work without: who the user is, what they want, decisions made,
  open tasks, and the outcome of finished work.

Your last reflection kept detail at 10/10. Aim for 2/10.""",
}

COMPRESSION_GUIDANCE: dict[int, str] = {
    0: "",
    **{level: f"{COMPRESSION_HEADINGS[level]}\n\n{body}" for level, body in _COMPRESSION_BODIES.items()},
}

_OBSERVATION_GROUP_TAG = re.compile(r"</?observation-group\b[^>]*>[ \t]*\n?", re.I)


def observer_system_prompt(*, instruction: str | None = None, multi_thread: bool = False, current_task: bool = True,
                           suggested_response: bool = True, thread_title: bool = False,
                           extractors: Sequence[Extractor] = (), shared: Collection[str] = ()) -> str:
    """The observer's instructions (docs/observational-memory.md#prompts); the flags switch the optional
    sections on or off,
    ``extractors`` adds one section per inline extractor (the user's, working memory). With
    ``multi_thread``, the slugs of ``shared`` are answered once, not per thread."""
    multi = _MULTI_THREAD_INPUT
    if multi_thread and shared:
        multi += f"\n\n{SHARED_SECTIONS_NOTE} " + ", ".join(f"<{slug}>" for slug in shared) + "."
    sections = [
        f"""{OBSERVER_IDENTITY}
What you write down is the ONLY thing the assistant will know about its past with this user:
anything you leave out is gone. Watch the messages you are given and extract the observations
that will let it carry on as if it remembered everything.""",
        EXTRACTION_INSTRUCTIONS,
        f"=== OUTPUT FORMAT ===\n\n{OUTPUT_FORMAT}\n\n"
        + _extra_sections(current_task, suggested_response, thread_title, extractors),
        f"=== GUIDELINES ===\n\n{GUIDELINES}",
        multi if multi_thread else _THREAD_ATTRIBUTION,
        _closing("Remember: these observations are the assistant's only memory. Make them count.",
                 current_task, suggested_response),
    ]
    return _with_instruction("\n\n".join(s for s in sections if s), instruction)


def observer_messages(transcript: str, *, previous_observations: str | None, prior_current_task: str | None,
                      prior_suggested_response: str | None, prior_thread_title: str | None = None,
                      skip_continuation_hints: bool = False,
                      attachments: Sequence[Attachment | dict[str, Any]] = (),
                      prior_extracted: Sequence[tuple[str, str]] = (),
                      thread_priors: Mapping[str, Sequence[tuple[str, str]]] | None = None) -> list[dict[str, Any]]:
    """The observer's two user messages (docs/observational-memory.md#prompts): the task, then the history to observe.

    ``thread_priors`` (several threads at once): each thread's prior values by section id,
    as (slug, value), shown in a ``<thread id>`` block of their own; ``prior_extracted`` are
    then the values shared by all threads.

    ``attachments`` are forwarded with the history: OpenAI content parts (``image_url`` /
    ``file``) as given, and the ``Attachment`` values of ``format_transcript`` as parts when
    their media type is one the observer takes by default (images and PDFs). With any, the
    history message's content becomes a list of parts."""
    history_text = f"{HISTORY_HEADING}\n\n{transcript}"
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
    task = _observer_task(previous_observations, priors, thread_priors or {}, skip_continuation_hints)
    return [{"role": "user", "content": task}, {"role": "user", "content": history}]


_PRIOR_HINTS = ("current-task", "suggested-response", "thread-title")


def _prior_lines(priors: Sequence[tuple[str, str | None]]) -> list[str]:
    return [f"- prior {slug}: {value.strip()}" if slug in _PRIOR_HINTS else f"<{slug}>{value}</{slug}>"
            for slug, value in priors if value and value.strip()]


def _observer_task(previous: str | None, priors: Sequence[tuple[str, str | None]],
                   thread_priors: Mapping[str, Sequence[tuple[str, str]]], skip_hints: bool) -> str:
    prompt = ""
    if previous and previous.strip():
        prompt += f"{PREVIOUS_OBSERVATIONS_HEADING}\n\n{previous.strip()}\n\n---\n\n"
        prompt += ("Do not repeat these existing observations: the ones you write now are appended "
                   "after them.\n\n")
    lines = _prior_lines(priors)
    for sid, values in thread_priors.items():
        if block := _prior_lines(values):
            lines += [f'<thread id="{sid}">', *block, "</thread>"]
    if lines:
        every = [*priors, *(pair for values in thread_priors.values() for pair in values)]
        slugs = list(dict.fromkeys(slug for slug, value in every if value and value.strip()))
        named = slugs[0] if len(slugs) == 1 else ", ".join(slugs[:-1]) + " and " + slugs[-1]
        prompt += f"{PRIOR_METADATA_HEADING}\n\n" + "\n".join(lines) + "\n\n"
        prompt += (f"Treat the prior {named} as hints for continuity, and update them from what the "
                   "new messages say.\n\n---\n\n")
    prompt += (f"{TASK_HEADING}\n\nExtract new observations from the message history in the next message. "
               "Leave out anything the previous observations already say, and write what is new in "
               "the format your instructions describe.")
    if skip_hints:
        prompt += f"\n\n{SKIP_HINTS_NOTE}"
    return prompt


def reflector_system_prompt(*, instruction: str | None = None, resource_scope: bool = False,
                            extractors: Sequence[Extractor] = ()) -> str:
    """The reflector's instructions (docs/observational-memory.md#reflection), quoting the observer's so
    both agree on the format."""
    sections = [
        f"""{REFLECTOR_IDENTITY}
Your reflections will be the ONLY thing the assistant knows about its past with this user.

Another part of your mind, the observer, wrote the observations following these instructions.
Read them to understand how your memories were made:

<observational-memory-instruction>
{EXTRACTION_INSTRUCTIONS}

=== OUTPUT FORMAT ===

{OUTPUT_FORMAT}

=== GUIDELINES ===

{GUIDELINES}
</observational-memory-instruction>""",
        """You are the part of the same mind that reflects: the observation reflector. Your job is to
reread all the observations, reorganise and streamline them, and draw the connections and
conclusions between them: what has been learned, seen, heard and done.

You see more of the picture than the observer does. The other parts of the mind can get lost in
details or side quests: work out what the real goal is, notice whether the work drifted away from
it, why, and how to get back. If it is still on course, good.

Rewrite the observations so the assistant can carry on from them and do better work.

IMPORTANT: your reflections are THE ENTIRE memory of the assistant. Whatever you do not write down
is forgotten at once. Leave nothing out that matters, and assume the assistant knows nothing else.""",
        """When you consolidate observations:
- keep dates and times where they are present: the sense of time is essential;
- keep the timestamps that matter most (when things started, finished, or changed);
- combine related items ("the assistant opened config.py five times while tracing the bug");
- keep ✅ markers together with the outcome they record;
- condense older observations more, and keep more detail in recent ones.

USER ASSERTIONS COME BEFORE QUESTIONS
- "User stated: X" is an assertion: the user told you something about themselves.
- "User asked: X" is a question: the user wanted information.
When both are present, the assertion wins: if the user said they have two kids and later asked how
many kids they have, keep the assertion; the question does not undo it.""",
        _RESOURCE_SCOPE_REFLECTION if resource_scope else "",
        f"""=== OUTPUT FORMAT ===

Structure your answer with these tags:

<observations>
All the consolidated observations, grouped by date, each with its priority emoji (🔴, 🟡, 🟢, ✅)
and its time; related observations grouped by indentation.
</observations>

{CURRENT_TASK_SECTION}

{SUGGESTED_RESPONSE_SECTION}""",
        _user_sections(extractors),
        _closing("", True, True),
    ]
    return _with_instruction("\n\n".join(s for s in sections if s), instruction)


def reflector_messages(observations: str, *, level: int, guidance: str | None = None,
                       skip_continuation_hints: bool = False, prior_extracted: Sequence[tuple[str, str]] = (),
                       extractors: Sequence[Extractor] = ()) -> list[dict[str, Any]]:
    """The reflector's user message (docs/observational-memory.md#reflection) for compression ``level`` (0..4)."""
    if level not in COMPRESSION_GUIDANCE:
        raise ValueError(f"compression level must be 0..4, not {level}")
    stripped = _OBSERVATION_GROUP_TAG.sub("", observations).strip()
    prompt = f"{REFLECT_HEADING}\n\n{stripped}\n\n---\n\n{REFLECTION_REQUEST}"
    if guidance and guidance.strip():
        prompt += f"\n\n{GUIDANCE_HEADING}\n\n{guidance.strip()}"
    if COMPRESSION_GUIDANCE[level]:
        prompt += f"\n\n{COMPRESSION_GUIDANCE[level]}"
    priors = [f"<{slug}>{value}</{slug}>" for slug, value in prior_extracted if value]
    if priors:
        prompt += f"\n\n{PRIOR_EXTRACTED_HEADING}\n\n" + "\n".join(priors)
    if any(e.inline for e in extractors):
        prompt += f"\n\n{ADDITIONAL_SECTIONS_HEADING}\n\n{extractor_sections(extractors)}"
    if skip_continuation_hints:
        prompt += f"\n\n{SKIP_HINTS_NOTE}"
    return [{"role": "user", "content": prompt}]


def reflection_start_level(model_id: str) -> int:
    # Gemini 2.5 Flash tends to echo its input at the gentle level, so it starts one higher.
    return 2 if "gemini-2.5-flash" in model_id else 1


def reflection_max_level(start: int) -> int:
    return min(4, start + 3)


def _user_sections(extractors: Sequence[Extractor]) -> str:
    return "\n\n".join(f"<{e.slug}>\n{e.instructions}\n</{e.slug}>" for e in extractors if e.inline)


def _extra_sections(current_task: bool, suggested_response: bool, thread_title: bool,
                    extractors: Sequence[Extractor] = ()) -> str:
    optional = [section for enabled, section in ((current_task, CURRENT_TASK_SECTION),
                                                 (suggested_response, SUGGESTED_RESPONSE_SECTION),
                                                 (thread_title, THREAD_TITLE_SECTION)) if enabled]
    if _user_sections(extractors):
        optional.append(_user_sections(extractors))
    if not optional:
        return "Write nothing outside the <observations> block."
    return ("Additional optional XML sections, each after the <observations> block:\n\n"
            + "\n\n".join(optional))


def _closing(first: str, current_task: bool, suggested_response: bool) -> str:
    lines = [first] if first else []
    lines.append("User messages are extremely important.")
    if current_task:
        lines.append("When the user asks a question or gives a new task, make clear in <current-task> "
                     "that it comes first.")
    if suggested_response:
        lines.append("When the assistant has to answer the user, say in <suggested-response> that it "
                     "should wait for the user's reply before going on with other work.")
    return "\n".join(lines)


def _with_instruction(prompt: str, instruction: str | None) -> str:
    if instruction and instruction.strip():
        return f"{prompt}\n\n=== CUSTOM INSTRUCTIONS ===\n\n{instruction.strip()}"
    return prompt
