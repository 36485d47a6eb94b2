// What the client-js harness scripts share: the client's logging kept off stdout (stdout
// carries the one JSON answer), and the one JSON object read from stdin (exit 2 if bad).

import { readFileSync } from 'node:fs';

export function readInput(check = () => {}) {
  for (const level of ['log', 'info', 'warn', 'debug']) console[level] = (...args) => console.error(...args);
  try {
    const input = JSON.parse(readFileSync(0, 'utf8'));
    check(input);
    return input;
  } catch (err) {
    process.stderr.write(`bad stdin: ${err.message}\n`);
    process.exit(2);
  }
}
