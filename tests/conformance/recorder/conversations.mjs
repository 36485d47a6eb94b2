// The conversations the recorder plays on Mastra's engine and the replay plays on ours.
// Each is a script: OM options in Mastra's names, the user's messages at fixed times, and
// what each model answers, keyed by call (the actor by turn and step, the observer and the
// reflector by the order of their calls). The recorder writes the resolved script into the
// trace, so the replay reads everything from the trace alone.

const START = Date.parse('2026-01-05T09:00:00.000Z'); // a Monday
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const MODELS = { actor: 'openai/gpt-4o', observer: 'openai/gpt-4o-mini', reflector: 'openai/gpt-4o-mini' };
const INSTRUCTIONS = 'You are a helpful assistant. Answer briefly and use what the user told you earlier.';

// What the user says, one fact per message, long enough that a few turns cross a threshold.
const FACTS = [
  'My name is Ada Lovelace and I live in Leeds with my partner Charles and our two kids, Byron who is nine and Annabella who is six.',
  'I work as a data engineer at a logistics company called Northwind Freight, mostly on their route planning pipeline written in Python.',
  'We are planning a hiking trip to the Alps next summer, probably around Chamonix, and the kids have never been above two thousand metres.',
  'I have a mild knee injury from running, so I would rather avoid very steep descents and keep daily elevation gain under eight hundred metres.',
  'Charles is vegetarian and Byron is allergic to peanuts, so any huts or restaurants we pick need to handle both of those properly.',
  'Our budget for the whole trip is about four thousand pounds including flights from Manchester, which we want to book before the end of March.',
  'I switched from running to swimming three weeks ago because of the knee, and I now swim twice a week at the Aquatics Centre before work.',
  'At work we are migrating the nightly batch jobs from cron on a single server to Airflow on Kubernetes, and I own the scheduling part.',
  'Annabella has started piano lessons on Thursdays at five, so Thursday evenings are off limits for anything else for the next term.',
  'I prefer answers with short bullet points and concrete numbers rather than long paragraphs, especially when we compare options.',
  'We also have a dog, a border collie called Pixel, and we need to find someone to look after her while we are away in the Alps.',
  'My manager asked me to present the Airflow migration plan at the engineering all-hands on the twentieth, so I need slides by the eighteenth.',
  'I am thinking about learning Rust this year, mainly to rewrite a slow geospatial matching step that currently takes forty minutes a night.',
  'Byron wants to try via ferrata on the trip, but I am not sure a nine year old is allowed on the easier routes near Chamonix.',
  'We decided against camping; we would rather stay in two or three mountain huts and a small hotel in the valley for the first nights.',
  'The flights from Manchester to Geneva on the Saturday morning are the cheapest, about one hundred and twenty pounds each with luggage.',
  'My sister Mary can look after Pixel for the first week, but she is away the second week, so we still need a plan for those seven days.',
  'I finished the first draft of the slides yesterday; the hardest part was explaining why backfills behave differently under Airflow.',
  'The Rust idea is on hold until after the migration ships, because the team cannot review two big changes at the same time.',
  'Annabella lost her first tooth today and insists the tooth fairy must leave a note in French because we are going to France.',
  'We booked the Saturday flights to Geneva this morning, four seats, and paid eight hundred and ten pounds in total with bags.',
  'Could you remind me what I said about my knee and the daily elevation limit? I want to check the hut route against it.',
  'Charles found a hut called Refuge du Lac Blanc that does vegetarian dinners; it is about six hundred metres of climbing from the lift.',
  'I told my manager the slides are done and she moved my talk to the twenty-second, which gives me two more days to rehearse.',
  'The kennel near Mary charges thirty pounds a night for Pixel; that is two hundred and ten pounds for the second week of the trip.',
  'Byron read that via ferrata routes need a minimum height of one metre forty, and he is one metre thirty-eight, so he is very upset.',
  'We settled on three nights in Chamonix, two huts, then two nights in Argentiere before flying home from Geneva on the Sunday.',
  'The migration went live last night; two of forty DAGs failed on timezone handling, which I fixed this morning before standup.',
  'I want a packing list for the kids that fits in two thirty litre backpacks, with rain gear, because the huts have no drying rooms.',
  'Please keep in mind that I will be offline from the twelfth to the twenty-sixth of July while we are in the mountains.',
];

// What the assistant answers when a turn has nothing special to say.
const REPLIES = [
  'Thanks, I have noted that. Short version: the plan still works, and I will keep it in mind for the next steps.',
  'Got it. Two quick points: that fits the constraints you gave earlier, and we can check the details when you are ready.',
  'Understood. I will factor that in; tell me when you want a concrete comparison with numbers.',
  'Noted. That changes one thing in the plan, and everything else stays as we discussed.',
];

function iso(ms) {
  return new Date(ms).toISOString();
}

function times(count, gaps = []) {
  // turn i happens one minute after turn i-1, unless gaps[i] says otherwise (ms)
  const at = [];
  let now = START;
  for (let i = 0; i < count; i++) {
    if (i > 0) now += gaps[i] ?? MINUTE;
    at.push(iso(now));
  }
  return at;
}

function textTurns(count, { thread, gaps, from = 0, prefix = 'u' } = {}) {
  return times(count, gaps).map((at, i) => ({
    id: `${prefix}${i + 1}`,
    thread,
    at,
    text: FACTS[(from + i) % FACTS.length],
    steps: [{ text: REPLIES[(from + i) % REPLIES.length] }],
  }));
}

// Observer replies: a dated block of observations, a current task and a suggested response.
function observation(n, day = 'Jan 5, 2026', time = '09:00') {
  return [
    '<observations>',
    `Date: ${day}`,
    `* 🔴 (${time}) User stated fact ${n}: ${FACTS[(n - 1) % FACTS.length].slice(0, 90)}`,
    `* 🟡 (${time}) Assistant acknowledged fact ${n} and offered to compare options with numbers.`,
    '</observations>',
    `<current-task>Primary: keep planning with the user (step ${n}).</current-task>`,
    `<suggested-response>Ask which detail of point ${n} the user wants to settle first.</suggested-response>`,
  ].join('\n');
}

function observations(count, day, time) {
  return Array.from({ length: count }, (_, i) => observation(i + 1, day, time));
}

function reflection(n) {
  return [
    '<observations>',
    'Date: Jan 5, 2026',
    `* 🔴 (09:00) Reflection ${n}: Ada from Leeds plans an Alps trip with two kids; knee limit 800 m a day.`,
    '</observations>',
  ].join('\n');
}

function reflections(count) {
  return Array.from({ length: count }, (_, i) => reflection(i + 1));
}

const FALLBACK = {
  observer: '<observations>\nDate: Jan 5, 2026\n* 🟡 (09:00) Unscripted observation.\n</observations>',
  reflector: '<observations>\nDate: Jan 5, 2026\n* 🟡 (09:00) Unscripted reflection.\n</observations>',
  actor: 'Unscripted reply.',
};

function conversation(name, description, fields) {
  return {
    name,
    description,
    instructions: INSTRUCTIONS,
    models: MODELS,
    resource: 'ai-chat',
    tools: [],
    observer: observations(40),
    reflector: reflections(10),
    fallback: FALLBACK,
    ...fields,
  };
}

// A small PNG (64x48, one colour): real dimensions for the image token estimate.
const PNG_64x48 =
  'iVBORw0KGgoAAAANSUhEUgAAAEAAAAAwCAIAAAAuKetIAAAAQ0lEQVR42u3PQQkAAAgEsItjRCMaywp+hcEKLNXzWgQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQErhaIweDxcSTWqwAAAABJRU5ErkJggg==';

const LONG_MESSAGE = `Here is the full itinerary draft my travel agent sent, please keep all of it in mind: ${Array.from(
  { length: 24 },
  (_, i) =>
    `Day ${i + 1}: walk from stage ${i + 1} to stage ${i + 2}, about ${8 + (i % 5)} kilometres with ${300 + 40 * (i % 7)} metres of climbing, lunch at a hut, dinner vegetarian and peanut free.`,
).join(' ')}`;

const WEATHER_TOOL = {
  name: 'lookup_weather',
  description: 'The weather forecast for a place',
  parameters: ['place'],
  result: {
    place: 'Chamonix',
    days: [
      { day: 'Saturday', high: 21, low: 9, summary: 'sunny, light wind from the west, good visibility on the ridges' },
      { day: 'Sunday', high: 18, low: 8, summary: 'cloud building after noon, thunderstorms likely from 4 pm' },
      { day: 'Monday', high: 16, low: 7, summary: 'rain in the morning, clearing by the evening, fresh snow above 3000 m' },
    ],
  },
};

const HUT_TOOL = {
  name: 'find_huts',
  description: 'Mountain huts near a place, with their facilities',
  parameters: ['near'],
  result: {
    huts: [
      { name: 'Refuge du Lac Blanc', altitude: 2352, vegetarian: true, peanutFree: 'on request', bedsFree: 6 },
      { name: 'Refuge de Bellachat', altitude: 2151, vegetarian: true, peanutFree: 'yes', bedsFree: 2 },
    ],
  },
};

function toolTurn(turn, stepCalls) {
  // steps: one tool call per step, then the text of the turn's reply
  return {
    ...turn,
    steps: [
      ...stepCalls.map((call, i) => ({
        toolCalls: [{ id: `call_${turn.id}_${i + 1}`, name: call.name, input: call.input }],
      })),
      { text: 'Here is what I found: Saturday is the best day, and Lac Blanc suits Charles and Byron.' },
    ],
  };
}

function syncOnly() {
  return conversation('sync-only', 'No async buffering: the threshold observes synchronously, then the log is reflected.', {
    options: { observation: { messageTokens: 300, bufferTokens: false }, reflection: { observationTokens: 200 } },
    turns: textTurns(18),
  });
}

function asyncDefault() {
  return conversation('async-default', "Mastra's default async buffering and activation, with a buffered reflection.", {
    options: { observation: { messageTokens: 500 }, reflection: { observationTokens: 400 } },
    turns: textTurns(22),
  });
}

function oversized(name, description, observation) {
  const turns = textTurns(8);
  turns[3] = { ...turns[3], text: LONG_MESSAGE };
  return conversation(name, description, {
    options: { observation, reflection: { observationTokens: 2000 } },
    turns,
  });
}

function toolSteps() {
  const turns = textTurns(10);
  turns[2] = toolTurn(turns[2], [
    { name: 'lookup_weather', input: { place: 'Chamonix' } },
    { name: 'find_huts', input: { near: 'Chamonix' } },
  ]);
  turns[6] = toolTurn(turns[6], [
    { name: 'find_huts', input: { near: 'Argentiere' } },
    { name: 'lookup_weather', input: { place: 'Argentiere' } },
  ]);
  turns[8] = toolTurn(turns[8], [{ name: 'lookup_weather', input: { place: 'Geneva' } }]);
  return conversation('tool-steps', 'Multi-step tool turns (a tool call per step) under async buffering.', {
    options: { observation: { messageTokens: 500 }, reflection: { observationTokens: 2000 } },
    tools: [WEATHER_TOOL, HUT_TOOL],
    turns,
  });
}

function multimodal() {
  const turns = textTurns(8);
  for (const i of [1, 6]) {
    turns[i] = {
      ...turns[i],
      text: `This is a photo of the trail map for day ${i}. ${turns[i].text}`,
      files: [{ mediaType: 'image/png', filename: `map-${i}.png`, data: PNG_64x48 }],
    };
  }
  return conversation('multimodal', 'Images in user messages: counted, shown to the observer, kept in context.', {
    options: { observation: { messageTokens: 400, bufferTokens: false }, reflection: { observationTokens: 2000 } },
    turns,
  });
}

function resourceScope() {
  const trip = textTurns(7, { thread: 'trip', prefix: 'trip-' });
  const work = textTurns(7, { thread: 'work', prefix: 'work-', from: 7 });
  const turns = [];
  for (let i = 0; i < 7; i++) turns.push(trip[i], work[i]);
  const at = times(turns.length);
  turns.forEach((turn, i) => (turn.at = at[i]));
  const observer = Array.from({ length: 20 }, (_, i) =>
    [
      '<observations>',
      '<thread id="trip">',
      'Date: Jan 5, 2026',
      `* 🔴 (09:00) Trip planning ${i + 1}: Alps with two kids, knee limit 800 m a day.`,
      `<current-task>Plan the Alps trip (round ${i + 1}).</current-task>`,
      '</thread>',
      '<thread id="work">',
      'Date: Jan 5, 2026',
      `* 🔴 (09:00) Work ${i + 1}: Airflow migration, slides for the all-hands.`,
      `<current-task>Prepare the migration talk (round ${i + 1}).</current-task>`,
      '</thread>',
      '</observations>',
    ].join('\n'),
  );
  return conversation('resource-scope', 'Resource scope: two threads of one user, interleaved, observed together.', {
    options: {
      scope: 'resource',
      observation: { messageTokens: 500, bufferTokens: false },
      reflection: { observationTokens: 2000 },
    },
    observer,
    turns,
  });
}

function retrieval() {
  const turns = textTurns(9);
  turns[6] = {
    ...turns[6],
    text: 'What exactly did I say about my knee in my first messages? Please check the original wording.',
    steps: [
      { toolCalls: [{ id: 'call_recall_1', name: 'recall', input: { cursor: 'u1', detail: 'low' } }] },
      { text: 'You said the knee limits you to under eight hundred metres of climbing a day.' },
    ],
  };
  return conversation('retrieval', 'Retrieval mode: observation groups with message ranges, and the recall tool called.', {
    options: {
      retrieval: true,
      observation: { messageTokens: 400, bufferTokens: false },
      reflection: { observationTokens: 2000 },
    },
    turns,
  });
}

function extractors() {
  const observer = Array.from({ length: 20 }, (_, i) =>
    [
      observation(i + 1),
      `<thread-title>${i < 2 ? 'Alps family hiking trip' : 'Alps trip and work talk'}</thread-title>`,
      `<topics>hiking, family, ${i % 2 ? 'work' : 'food'} (round ${i + 1})</topics>`,
    ].join('\n'),
  );
  const reflector = Array.from({ length: 5 }, (_, i) =>
    [
      reflection(i + 1),
      `<current-task>Reflected task ${i + 1}: finish the trip plan.</current-task>`,
      `<suggested-response>Offer the packing list (reflection ${i + 1}).</suggested-response>`,
    ].join('\n'),
  );
  return conversation('extractors-titles', 'A thread title, a custom extractor, and hints from the reflector.', {
    options: {
      observation: {
        messageTokens: 300,
        bufferTokens: false,
        threadTitle: true,
        extract: [{ name: 'Topics', instructions: 'The topics the user talks about, comma separated.' }],
      },
      reflection: { observationTokens: 180 },
    },
    observer,
    reflector,
    turns: textTurns(18),
  });
}

function temporalMarkers() {
  const gaps = [0, MINUTE, 25 * MINUTE, 3 * HOUR + 10 * MINUTE, 2 * DAY, 11 * MINUTE, 9 * MINUTE, 40 * MINUTE, 5 * DAY, MINUTE];
  return conversation('temporal-markers', 'Temporal gap markers after silences of minutes, hours and days.', {
    options: {
      temporalMarkers: true,
      observation: { messageTokens: 400, bufferTokens: false },
      reflection: { observationTokens: 2000 },
    },
    turns: textTurns(10, { gaps }),
  });
}

function idleAndProviderChange() {
  const gaps = Array(16).fill(MINUTE);
  gaps[6] = 7 * MINUTE; // the cache went cold: ttl activation
  const turns = textTurns(16, { gaps });
  for (let i = 11; i < 16; i++) turns[i].model = 'anthropic/claude-sonnet-4-5'; // provider change at turn 12
  return conversation('idle-provider-change', 'Buffered chunks activated after an idle gap and on a provider change.', {
    options: {
      activateAfterIdle: '5m',
      activateOnProviderChange: true,
      observation: { messageTokens: 800, bufferTokens: 150 },
      reflection: { observationTokens: 2000 },
    },
    turns,
  });
}

function sharedBudget() {
  return conversation('shared-budget', 'shareTokenBudget: the message threshold grows into what observations leave.', {
    options: {
      shareTokenBudget: true,
      observation: { messageTokens: 200, bufferTokens: false },
      reflection: { observationTokens: 150 },
    },
    turns: textTurns(16),
  });
}

function bufferOnIdle() {
  return conversation('buffer-on-idle', 'observation.bufferOnIdle: what a finished turn left is buffered at its end.', {
    options: { observation: { messageTokens: 600, bufferOnIdle: true }, reflection: { observationTokens: 2000 } },
    turns: textTurns(10),
  });
}

export const CONVERSATIONS = [
  syncOnly(),
  asyncDefault(),
  oversized('oversized-message', 'One message larger than the threshold, under async buffering.', { messageTokens: 400 }),
  oversized('oversized-sync', 'One message larger than the threshold, without async buffering.', {
    messageTokens: 400,
    bufferTokens: false,
  }),
  toolSteps(),
  multimodal(),
  resourceScope(),
  retrieval(),
  extractors(),
  temporalMarkers(),
  idleAndProviderChange(),
  sharedBudget(),
  bufferOnIdle(),
];
