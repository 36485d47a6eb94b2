// What a real browser lets pages of different origins read from the server (CORS).
//
// stdin: ONE JSON object
//   { target (e.g. http://127.0.0.1:4111/api/agents), origins: ["local", "https://evil.example", ...],
//     method? (default GET), body? (JSON, sent with content-type application/json),
//     headers? (extra request headers, e.g. {"x-mastra-client-type": "studio"}) }
// stdout: ONE JSON line
//   { results: [{origin, ok, status, error}] }
// For each origin a blank page is served AT that origin, and the page runs
// fetch(target, {credentials: "include", method, headers, body}). `ok` means the browser let
// the page read the response (a CORS refusal is a TypeError: `error` holds its message).
// "local" is a real page server on http://localhost:<free port> (a page on this machine,
// as a dev frontend is); any other origin is answered by request interception (nothing is
// fetched from it), which the browser counts as a public site.
// Exit code 0 whenever the JSON was printed, 2 for bad stdin.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import { chromium } from 'playwright-core';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];

let input;
try {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  input = JSON.parse(text);
  if (typeof input.target !== 'string' || !Array.isArray(input.origins)) throw new Error('need target and origins');
} catch (err) {
  process.stderr.write(`cors_browser.mjs: bad stdin: ${err.message}\n`);
  process.exit(2);
}

const PAGE = '<!doctype html><title>page</title>';
const pageServer = http.createServer((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(PAGE); });
await new Promise(resolve => pageServer.listen(0, '127.0.0.1', resolve));
const localOrigin = `http://localhost:${pageServer.address().port}`;

const userDataDir = mkdtempSync(join(tmpdir(), 'cors-browser-'));
const context = await chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, args: ARGS });
const results = [];
try {
  for (const asked of input.origins) {
    const origin = asked === 'local' ? localOrigin : asked;
    const page = await context.newPage();
    if (asked !== 'local') {
      await page.route(`${origin}/**`, route => route.fulfill({ status: 200, contentType: 'text/html', body: PAGE }));
    }
    await page.goto(`${origin}/page.html`);
    const result = await page.evaluate(async ({ target, method, body, headers }) => {
      try {
        const init = { credentials: 'include', method, headers: { ...headers } };
        if (body !== undefined) {
          init.body = JSON.stringify(body);
          init.headers['content-type'] = 'application/json';
        }
        const response = await fetch(target, init);
        await response.text();
        return { ok: true, status: response.status, error: null };
      } catch (err) {
        return { ok: false, status: null, error: String(err) };
      }
    }, { target: input.target, method: input.method ?? 'GET', body: input.body, headers: input.headers ?? {} });
    results.push({ origin, ...result });
    await page.close();
  }
} finally {
  await context.close();
  pageServer.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify({ results }) + '\n');
