#!/usr/bin/env node
// The long-lived judge: one JSON request a line on stdin, {"id", "script", "input"}; one JSON
// line back per request, {"id", "result"} or {"id", "error"}, in the order they finish.
// `script` names a harness module of this folder that exports `run(input)`.

import { createInterface } from 'node:readline';
import { quietConsole } from './harness.mjs';

quietConsole();
const modules = new Map();

function load(script) {
  if (!/^[a-z_]+\.mjs$/.test(script)) throw new Error(`not a harness script: ${script}`);
  if (!modules.has(script)) modules.set(script, import(`./${script}`));
  return modules.get(script);
}

async function answer(line) {
  let id = null;
  try {
    const request = JSON.parse(line);
    id = request.id;
    const { run } = await load(request.script);
    return { id, result: await run(request.input) };
  } catch (err) {
    return { id, error: err?.stack || String(err) };
  }
}

for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim()) answer(line).then((reply) => process.stdout.write(`${JSON.stringify(reply)}\n`));
}
