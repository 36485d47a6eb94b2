// How a judge script runs: as a script (one JSON object on stdin, one JSON line on stdout,
// exit 2 for bad input, 1 for a harness bug) or, when it exports `run`, inside serve.mjs,
// the one long-lived judge process a test worker keeps (node and the client packages load once).

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export class BadInput extends Error {}

// stdout carries the JSON answers: the clients' own logging goes to stderr.
export function quietConsole() {
  for (const level of ['log', 'info', 'warn', 'debug']) console[level] = (...args) => console.error(...args);
}

export function runAsScript(moduleUrl, run) {
  if (!process.argv[1] || fileURLToPath(moduleUrl) !== process.argv[1]) return;
  quietConsole();
  let input;
  try {
    input = JSON.parse(readFileSync(0, 'utf8'));
  } catch (err) {
    process.stderr.write(`bad stdin: ${err.message}\n`);
    process.exit(2);
  }
  run(input).then(
    (out) => process.stdout.write(`${JSON.stringify(out)}\n`, () => process.exit(0)),
    (err) => {
      process.stderr.write(err instanceof BadInput ? `bad stdin: ${err.message}\n` : `harness bug: ${err?.stack || err}\n`);
      process.exit(err instanceof BadInput ? 2 : 1);
    },
  );
}
