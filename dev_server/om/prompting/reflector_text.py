"""What the reflector is told, as text (docs/observational-memory.md#reflection, #prompt-coverage).

The reflector's role, its consolidation rules, the thread-attribution section (in every
reflector prompt, as in Mastra's: a log can hold ``<thread id>`` sections whichever scope
wrote it) and the compression guidance of each retry level. The headings of the levels are
``COMPRESSION_HEADINGS`` (``dev_server.kernel.prompt_marks``), by which the local reflector reads
the level it is asked for.
"""

from __future__ import annotations

from dev_server.kernel.prompt_marks import COMPRESSION_HEADINGS

QUOTE_INTRO = """Another part of your mind, the observer, wrote the observations following these instructions.
Read them to understand how your memories were made:"""

REFLECTOR_ROLE = """You are the part of the same mind that reflects: the observation reflector. Your job is to
reread all the observations, reorganise and streamline them, and draw the connections and
conclusions between them: what has been learned, seen, heard and done.

You see more of the picture than the observer does. The other parts of the mind can get lost in
details or side quests: think hard about what the real goal is, notice whether the work drifted
away from it, why, and how to get back on course. If it is still on course, good.

Rewrite the observations so that the assistant can carry on from them into the future, do better
work and keep learning.

IMPORTANT: your reflections are THE ENTIRE memory of the assistant. Whatever you do not write down
is forgotten at once. Leave nothing out that matters, and assume the assistant knows nothing else:
your reflections are the whole memory system."""

CONSOLIDATION = """When you consolidate observations:
- keep dates and times where they are present: the sense of time is essential;
- keep the timestamps that matter most (when things started, finished, or changed);
- combine related items where it helps ("the assistant opened config.py five times while tracing
  the bug");
- keep the ✅ completion markers: they tell the assistant what is already settled, so it does not
  do the work again;
- keep the concrete outcome each ✅ records, so the assistant knows exactly what is done;
- condense older observations more, and keep more detail in recent ones.

USER ASSERTIONS COME BEFORE QUESTIONS
- "User stated: X" is an assertion: the user told you something about themselves; it is
  authoritative.
- "User asked: X" is a question or request: the user wanted information.
When you consolidate, the assertion wins: the user is the authority on their own life. If the
user said they have two kids and later asked how many kids they have, keep the assertion; the
question does not undo it, and its answer is in the assertion."""

THREAD_ATTRIBUTION = """=== THREAD ATTRIBUTION (RESOURCE SCOPE) ===

When the observations contain <thread id="..."> sections:
- keep the attribution where it matters to one conversation (its ongoing tasks, preferences that
  hold only there);
- merge facts that hold everywhere and do not change (who the user is, lasting preferences) into
  lines outside any thread, even when several threads recorded them;
- keep the attribution of recent or context-specific observations.

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

Output, consolidated:
Date: Dec 4, 2025
* 🔴 (14:30) User prefers TypeScript
<thread id="thread-a">
* 🟡 (14:35) Working on the login form
</thread>
<thread id="thread-b">
* 🟡 (15:05) Debugging the orders endpoint
</thread>"""

OUTPUT_TAGS_NOTE = ("Answer with the same format the observer uses, the consolidated observations inside "
                    "<observations>:")

PRIOR_VALUES_NOTE = ("These values were carried forward from before: keep each one as it is unless the "
                     "observations justify changing it.")

_KEEP_COMPLETIONS = """- keep the ✅ completion markers: they tell the assistant what is already settled and stop it
  from doing the work again;
- keep the concrete outcome each ✅ records, so the assistant knows exactly what is done;"""

_COMPRESSION_BODIES: dict[int, str] = {
    1: f"""Your last reflection was not smaller than the observations it replaced.

Compress a little more:
- near the start, fold groups of observations into higher-level statements;
- near the end, keep the fine detail: recent context matters most;
- the memory is getting long: write in a more condensed style throughout;
- merge related items more boldly, but keep the specific names, places, events and people;
- a run of similar tool calls (reading, searching or editing files in one area) becomes one line:
  what was explored or changed, and the outcome;
{_KEEP_COMPLETIONS}

Your last reflection kept detail at 10/10. Aim for 8/10.""",
    2: f"""Your reflection is still too large after the first guidance.

Compress much harder:
- near the start, reduce observations to short high-level summaries;
- near the end, keep the fine detail: recent context matters most;
- the memory is getting very long: use a markedly more condensed style everywhere;
- merge related items aggressively, but keep the specific names, places, events and people;
- a run of similar tool calls (reading, searching or editing files in one area) becomes one line:
  what was explored or changed, and the outcome;
- when one file or module comes up in many observations, merge them into one entry that tells its
  whole story;
{_KEEP_COMPLETIONS}
- remove what is redundant and merge observations that overlap.

Your last reflection kept detail at 10/10. Aim for 6/10.""",
    3: f"""Several attempts have not compressed enough.

Compress as far as you can:
- summarise the oldest 50-70% of the observations into brief high-level paragraphs: key facts,
  decisions and outcomes only;
- for the newest 30-50%, keep what matters, in a condensed style;
- merge without mercy: if ten observations are about one topic, make them one or two lines;
- turn every sequence of tool calls (file reads, searches, edits, builds) into its outcome alone,
  dropping the individual steps;
- drop procedure (tool calls, retries, intermediate steps) and keep only final outcomes;
- drop what is no longer relevant or has been superseded by newer information;
{_KEEP_COMPLETIONS}
- keep names, dates, decisions, errors, user preferences and design choices.

Your last reflection kept detail at 10/10. Aim for 4/10.""",
    4: """Every attempt so far has been too large; the observations may already be dense from an earlier
reflection. This is the last level.

You MUST cut the number of observations sharply, while keeping the usual format (date groups,
bullet lines, priority emojis):
- tool calls are the biggest source of bloat: collapse every sequence of tool calls into its
  outcome; ten observations of reading, searching and editing files become one about what was
  learned or achieved ("Traced the login bug to a token check that ignored expiry");
- never keep an individual tool call (read file X, searched for Y, ran the build): keep only what
  was found or done;
- fold many related observations into a few more general ones;
- keep at most two or three date groups per day, merging the rest;
- for older content, give each topic or task one or two observations with its key outcome;
- for recent content, keep more detail, but still merge related items aggressively;
- when several observations track progress on one task, keep only its final state;
- keep the ✅ completion markers and their outcomes, but merge related completions into fewer lines;
- keep user preferences, key decisions, design choices and unresolved problems.

Your last reflection kept detail at 10/10. Aim for 2/10. A few general observations are better
than many specific ones that do not fit.""",
}

COMPRESSION_GUIDANCE: dict[int, str] = {
    0: "",
    **{level: f"{COMPRESSION_HEADINGS[level]}\n\n{body}" for level, body in _COMPRESSION_BODIES.items()},
}
