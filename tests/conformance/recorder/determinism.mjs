// What makes a recording repeatable, installed before Mastra is imported:
// - one clock: `Date` starts each turn at the moment the script sets and moves 1 ms at
//   every read, so two things made in a turn are never stamped the same millisecond (as in
//   production, where time passes between them), and the same run reads the same times
//   (the replay's ManualClock with a 1 ms tick does the same; times are compared to the second);
//   timers stay real, so waits still end;
// - seeded randomness whose ids always estimate to the same token count: every random
//   byte is 0xa0-0xff, so no segment of a UUID is all digits (tokenx counts an all-digit
//   segment as one token, a mixed one by its length). The replay draws our gateway's
//   UUIDs by the same rule, so ids cost the same tokens on both sides.
import { createRequire } from 'node:module';

const RealDate = Date;
let nowMs = 0;

class ScriptDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(nowMs++);
    else super(...args);
  }

  static now() {
    return nowMs++;
  }
}

function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function installDeterminism(startIso, seed) {
  nowMs = RealDate.parse(startIso);
  globalThis.Date = ScriptDate;
  performance.now = () => nowMs; // durations measured on it: the reads in between
  const next = mulberry32(seed);
  Math.random = () => 0.625 + 0.375 * next(); // bytes drawn as 256 * random are 0xa0-0xff
  const hex = () => (160 + Math.floor(next() * 96)).toString(16);
  const randomUUID = () => {
    const b = Array.from({ length: 16 }, hex);
    b[6] = `4${b[6][1]}`;
    b[8] = `a${b[8][1]}`;
    return `${b.slice(0, 4).join('')}-${b.slice(4, 6).join('')}-${b.slice(6, 8).join('')}-${b.slice(8, 10).join('')}-${b.slice(10).join('')}`;
  };
  const require = createRequire(import.meta.url);
  const crypto = require('node:crypto');
  crypto.randomUUID = randomUUID;
  require('node:module').syncBuiltinESMExports();
  globalThis.crypto.randomUUID = randomUUID;
}

export function setClock(iso) {
  nowMs = RealDate.parse(iso);
}
