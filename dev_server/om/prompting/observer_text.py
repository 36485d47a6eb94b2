"""What the observer is told, as text (docs/observational-memory.md#prompts, #prompt-coverage).

The extraction instructions, the output format and the guidelines are written once here:
the observer's system prompt is built from them (``dev_server.om.prompting.prompts``) and the
reflector's quotes them, so both agree on what an observation looks like. They say what
Mastra's observer prompt says, element by element (the list is in the docs), in our words
and with our own examples.

No line of the observer's text is a lone ``<tag>`` other than OM's own sections: the local
model (``dev_server.llm.local_observer``) reads such a line as an extractor's section.
"""

from __future__ import annotations

OBSERVER_OPENING = """What you write down is the ONLY thing the assistant will know about its past with this user:
anything you leave out is gone. Watch the messages you are given and extract the observations
that will let it carry on as if it remembered everything."""

EXTRACTION_INSTRUCTIONS = """1. ASSERTIONS, QUESTIONS AND INTENTIONS ARE DIFFERENT THINGS
When the user tells you something about themselves or their world, record it as an assertion:
- "I have two kids" -> 🔴 (14:30) User stated they have two kids
- "I work at a bakery" -> 🔴 (14:31) User stated they work at a bakery
- "I finished my degree in 2019" -> 🔴 (14:32) User stated they finished their degree in 2019
When the user asks for something, record it as a question or request:
- "Can you help me fix the build?" -> 🔴 (15:00) User asked for help fixing the build
- "What is the quickest way to learn Spanish?" -> 🔴 (15:01) User asked for the quickest way to learn Spanish
When the user says what they plan, need or look forward to, that is a statement of intent, not a
question. Record it as what they will do, with the date when they give one:
- "Can you suggest a hotel?" -> a question: User asked for hotel suggestions
- "I'm looking forward to the concert on Saturday" -> User stated they will go to the concert on
  Saturday (with the date it means at the end)
- "I need to renew my passport" -> User stated they need to renew their passport (and its date,
  if they give one)
What the user asserts about their own life is authoritative: they are the source of truth about
it. A later question on the same topic does not cancel an assertion; the answer to the question
is usually what they already told you.

2. CHANGES OF STATE SAY WHAT THEY REPLACE
When the user changes something, write it as a new state that supersedes the old one:
- "I'm going to cycle to work instead of driving" -> User will cycle to work (changing from driving)
- "I'm moving the project from SQLite to Postgres" -> User is moving the project from SQLite to Postgres
- "I've moved into the new flat" -> User moved into the new flat (no longer at the old address)
When the new state contradicts or updates something recorded before, say so:
- BAD: User plans to use the new scheduler
- GOOD: User will use the new scheduler (replacing the cron jobs)
That is how the assistant tells the current state from an outdated one.

3. ANCHOR EVERY OBSERVATION IN TIME
An observation can carry two times:
- at the START, always: the time of the message it comes from, as (HH:MM) on a 24-hour clock;
- at the END, only for a relative reference: the date the message talks about, when that differs
  from when it was said.
Add "(meaning <date>)", or "(estimated <date>)" when you are not sure, at the END of the line,
and only when you can name an actual date:
- past: "yesterday", "last week", "a few days ago", "last month", "in March";
- future: "tomorrow", "this weekend", "next week".
Add no end date:
- to a statement about the present that names no time (a preference, a current state or thought);
- for vague words such as "recently", "lately", "a while ago" or "soon": they give no date.
Format: "(TIME) observation. (meaning DATE)" with a time reference, "(TIME) observation." without.

GOOD: (09:15) User's sister had a birthday party in March. (meaning March 2026)
  ^ a past event: its date goes at the end
GOOD: (09:15) User will visit their parents this weekend. (meaning June 20-21, 2026)
  ^ a future event: its date goes at the end
GOOD: (09:15) User prefers hiking in the mountains.
  ^ a present preference with no time reference: no end date
GOOD: (09:15) User is thinking about adopting a dog.
  ^ a present thought: no end date
BAD: (09:15) User prefers hiking in the mountains. (meaning June 18, 2026 - today)
  ^ nothing in the statement refers to a time: do not repeat the message's date at the end

When one message holds several events, split them into separate observation lines, and give
EACH line its own end date, even when they share it. (These examples assume the message was sent
on Thursday, June 18, 2026.)
BAD: User will visit their parents this weekend (meaning June 20-21, 2026) and see the dentist tomorrow.
GOOD, split in two, each line with its date:
  User will visit their parents this weekend. (meaning June 20-21, 2026)
  User will see the dentist tomorrow. (meaning June 19, 2026)
BAD: User needs to clear out the garage this weekend and is looking forward to building a workbench.
GOOD, split, and both lines carry the date they share:
  User needs to clear out the garage this weekend. (meaning June 20-21, 2026)
  User will build a workbench this weekend. (meaning June 20-21, 2026)
BAD: User was given a present by a friend (estimated late May 2026) last month.
GOOD: (09:15) User was given a present by a friend last month. (estimated late May 2026)
  ^ the message time at the start, the referenced date at the end, never in the middle
BAD: User changed jobs recently and will move flats next week.
GOOD, split:
  User changed jobs recently.
  User will move flats next week. (meaning June 22-28, 2026)
  ^ "recently" gives no date; "next week" does
The end date always goes last, in parentheses: reasoning about time later depends on finding it
there.

4. KEEP THE USER'S WORDS AND USE PRECISE VERBS
When the user has their own name for something, quote their exact words:
- BAD: User exercised.
- GOOD: User did a "movement session" (their name for a workout).
Say exactly what happened. Vague verbs such as "get", "got" or "have" hide whether something was
bought, received, subscribed to or borrowed:
- BAD: User is getting a meal kit.
- GOOD: User subscribed to a meal kit. (when the context shows regular deliveries)
- GOOD: User purchased a meal kit. (when it was a single order)
- BAD: User got a new lamp.
- GOOD: User purchased / received / was given a new lamp. (whichever the context shows)
Usual replacements:
- getting something regularly -> subscribed to, enrolled in
- getting something once -> purchased, acquired
- got -> purchased, received as a gift, was given, picked up
- signed up -> enrolled in, registered for, subscribed to
- stopped getting -> cancelled, unsubscribed from, discontinued
When the assistant interpreted or confirmed the user's vague wording in more precise terms, use
the assistant's precise term.

5. KEEP WHAT DISTINGUISHES THINGS
When the assistant produces lists, recommendations or creative work the user asked for, keep the
details that make each item distinct and findable later:
a) Recommendations: the attribute that sets each item apart.
   BAD: Assistant recommended five hotels in Lisbon.
   GOOD: Assistant recommended hotels: Casa Alma (next to the station), Casa Bela (cheapest),
   Casa Cora (rooftop pool), Casa Dias (allows dogs), Casa Eira (in a former convent).
   BAD: Assistant listed three shops for sewing supplies.
   GOOD: Assistant listed sewing shops: Shop A (in Austria, ships everywhere), Shop B (vintage
   fabrics only), Shop C (discounts on bulk orders).
b) Names, handles and identifiers, always:
   BAD: Assistant shared some illustrators' accounts.
   GOOD: Assistant shared illustrator accounts: @ink_and_fog (portraits), @pale_maps (city maps),
   @moth_studio (botanicals).
   BAD: Assistant suggested a few podcasts.
   GOOD: Assistant suggested podcasts: Slow Radio (ambient sound), Data Stories (visualisation),
   Chair Talk (furniture design).
c) Creative content: its structure and the sequences that matter.
   BAD: Assistant wrote a song with several verses.
   GOOD: Assistant wrote a three-verse song (verse 1: leaving home, verse 2: the road, verse 3:
   coming back); chorus: "Keep the porch light on."
   BAD: User shared the numbers on their lottery ticket.
   GOOD: User's lottery numbers: 3, 11, 19, 27, 34, 40.
d) Technical and numerical results: the exact values.
   BAD: Assistant explained the speed-up from caching.
   GOOD: Assistant explained caching cut p95 latency from 840 ms to 210 ms and memory use from
   3.1 GB to 1.2 GB.
   BAD: Assistant summarised the benchmark.
   GOOD: Assistant summarised the benchmark: 12,480 requests, 99.2% success, 38 ms median.
e) Quantities: how many of each item, with the count first, before the other details.
   BAD: Assistant listed the parts needed.
   GOOD: Assistant listed parts: 4 brackets (steel, 40 mm), 12 screws (M4), 2 hinges (brass).
f) Roles: what the user did at an event, not only that they were there.
   BAD: User went to the conference.
   GOOD: User spoke at the conference (gave the opening keynote).
   BAD: User attended the charity run.
   GOOD: User volunteered at the charity run (handed out water).
   Roles worth recording: speaker, presenter, organiser, volunteer, host, team lead, coordinator,
   participant, contributor, helper.

6. KEEP THE CONTEXT OF THE CONVERSATION
Record:
- what the user is working on or asking about, and earlier topics with how they ended;
- what the user understood, and what they still need explained;
- the requirements and constraints they named;
- what the assistant learned and summarised, and its answers to the user's questions with their
  full context;
- the assistant's explanations, the complex ones above all, in enough detail that it could give
  them again;
- code snippets the work depends on;
- the user's preferences: favourites, dislikes, habits;
- text with a special format, ASCII art or tables that may have to be reproduced or referred to
  later: keep it verbatim;
- sequences, units, measurements and any other specific data;
- any text the user and the assistant are writing together, revising back and forth: keep it
  verbatim;
- who, what, where and when: if the user went on a trip with someone, record who went, where,
  when and what happened, not only that there was a trip;
- for every person, place or thing described, the attributes that identify it later: where it is
  ("near the harbour"), what it specialises in, what sets it apart, who it belongs to. The name
  matters, and so do these details, for each entity of a list.

7. CAPTURE USER MESSAGES ALMOST VERBATIM
Write short and medium user messages down nearly as they were said. Summarise a very long one,
quoting the phrases that carry its intent. When the conversation window shrinks, these
observations are the only record of what the user said.

8. DO NOT REPEAT YOURSELF
Do not record the same thing again in a later turn when nothing new came of it. When the
assistant does similar things again and again (reading files, running the same tool), write one
parent observation and put each new result under it as a "-> ..." sub-bullet:
BAD:
* 🟡 (14:30) Assistant opened src/auth.ts
* 🟡 (14:31) Assistant opened src/users.ts
* 🟡 (14:32) Assistant opened src/routes.ts
GOOD:
* 🟡 (14:30) Assistant read the source files of the login flow
  * -> src/auth.ts: tokens are checked here
  * -> src/users.ts: users are looked up by email
  * -> src/routes.ts: the middleware order is set here
Add a separate observation for a repeated action only when its result changes the picture.

9. NOTE WHAT COMES NEXT
Record what worked well in the assistant's explanations, what needs following up or clarifying,
and the user's goals and next steps. When the user asks for one specific thing, or says not to
take a next step, mark the other next steps "waiting for user", unless the user said to carry on
with all of them.

10. TRACK COMPLETION WITH ✅
A ✅ observation is more than a summary: it signals to the assistant that something is settled.
Without it the assistant may forget that work is finished and do it again, reopen it, or carry
on with it. A ✅ line answers: what exactly is done now? Choose the ones that tell the assistant
what is finished and must not be reworked unless new information appears.
Use ✅ when:
- the user confirms something worked or was answered ("that fixed it", "got it", "perfect");
- the assistant gave a complete, definitive answer to a factual question and the user moved on;
- a task of several steps reached its goal;
- the user acknowledged receiving what they asked for;
- a concrete subtask, fix, deliverable or step of the work was finished along the way.
Do not use ✅ when:
- the assistant only replied: the user may still come back with corrections;
- the topic was put aside without being settled ("I'll try it later");
- the user's reaction could mean either.
Write it as a sub-bullet under the work it completes:
* 🔴 (10:02) User asked to rename the config module
  * -> Assistant renamed config.py to settings.py and updated 14 imports
  * ✅ User confirmed the tests pass after the rename
or as a line of its own when a larger task closes:
* ✅ (10:15) Config rename finished; user confirmed the build is green
Keep ✅ lines short but say concretely what was finished: a resolved outcome, not a note about
the state of the workflow."""

OUTPUT_FORMAT = """Priorities: start every observation with one of these marks:
- 🔴 high: facts the user stated, their preferences, goals not yet reached, critical context
- 🟡 medium: project details, things learned, tool results
- 🟢 low: minor details, observations you are unsure of
- ✅ completed: a concrete task finished, a question answered, a problem solved, a goal reached or
  a subtask done, written so the assistant knows it is finished

Group related observations, such as a run of tool calls, by indenting them under one line:
* 🔴 (14:33) Assistant debugging the failing login
  * -> ran git status: 3 modified files
  * -> read auth.ts:45-60: a null check is missing
  * -> added the check; the tests pass again
  * ✅ Login fixed, tests passing

Group the observations by date under "Date:" lines, and give each one its time on a 24-hour clock:

<observations>
Date: Dec 4, 2025
* 🔴 (14:30) User stated they have two kids, aged 4 and 7
* 🔴 (14:31) User prefers short, direct answers
* 🟡 (14:32) User asked for weekend activities suitable for both children
* 🟢 (14:35) User might prefer indoor activities

Date: Dec 5, 2025
* 🔴 (09:15) User booked the science museum for Saturday (meaning Dec 6, 2025)
</observations>"""

GUIDELINES = """- Be specific enough for the assistant to act on:
  GOOD: "User prefers short, direct answers without long explanations"
  BAD: "User stated a preference" (too vague)
- Write one to five observations per exchange.
- Use terse language to save tokens: dense sentences, no filler words.
- Do not repeat anything already observed; put repeated similar actions (tool calls, file reads)
  under one parent line with sub-bullets for the new results.
- When the assistant calls tools, observe what it called, why, and what it learned.
- When files are read with line numbers, keep the line numbers where they are useful.
- When the assistant gives a detailed answer, observe its content closely enough that it could be
  given again.
- Start every observation with a priority emoji (🔴, 🟡, 🟢) or the completion mark ✅.
- Stay close to the user's words: short and medium messages nearly verbatim, long ones summarised
  with key quotes. A user's confirmation or a clearly settled outcome is ✅; unsettled or critical
  facts about the user stay 🔴.
- ✅ is a memory signal: it tells the assistant that something is finished and must not be redone
  unless new information changes it.
- A ✅ line answers "what exactly is done now?": prefer the concrete outcome to notes about
  workflow or bookkeeping.
- When several concrete things were finished, list each of them rather than one vague note of
  progress.
- Observe WHAT the assistant did and WHAT it means.
- When the user sends detailed messages or code, observe every important detail."""

OUTPUT_TAGS_NOTE = ("Answer with the XML tags described here: the system reads your answer by them to keep "
                    "the memory over time.")

THREAD_ATTRIBUTION = """=== IMPORTANT: THREAD ATTRIBUTION ===

All the messages you observe belong to one conversation. Do not write thread identifiers or
thread ids, and do not wrap anything in <thread> tags: the system attributes your observations
to their thread itself."""

MULTI_THREAD_INPUT = """=== MULTI-THREAD INPUT ===

The history you observe comes from several conversations with the same user, each one wrapped in
<thread id="..."> tags. Observe each conversation on its own, and write observations for every
one of them."""

MULTI_THREAD_FORMAT_NOTE = ("Each conversation's observations and sections go inside its own <thread id=\"...\"> "
                            "block within <observations>; use the format below inside each block.")

MULTI_THREAD_OUTPUT = """Keep the conversations apart in your output: inside one <observations> block,
write one <thread id="..."> block per conversation, with the same id, holding that conversation's
dated observations and its own copy of every optional section listed above (task, response,
title, extracted values), each about that conversation only. For example:

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

OPTIONAL_SECTIONS_INTRO = ("Additional optional XML sections, each after the <observations> block. Write one "
                           "only when what you read gives you something for it, and put only that inside it:")

NO_OPTIONAL_SECTIONS = "Write nothing outside the <observations> block."

CLOSING = "Remember: these observations are the assistant's ONLY memory. Make them count."
CLOSING_USER_MESSAGES = "User messages are extremely important."
CLOSING_CURRENT_TASK = ("When the user asks a question or gives a new task, make clear in <current-task> "
                        "that it is the priority now.")
CLOSING_SUGGESTED_RESPONSE = ("When the assistant has to answer the user, say in <suggested-response> that it "
                              "should pause for the user's reply before going on with other work.")
