// Open a process's /docs (Swagger UI) in Debian's headless chromium with nothing but the
// server reachable, as on a machine without internet access.
//
// stdin: ONE JSON object  { url (e.g. http://127.0.0.1:8787/docs), timeoutMs? (default 30000) }
// stdout: ONE JSON line
//   { ok, title, operations, loadMs, external: [url], failed: [{url, status|error}],
//     pageErrors: [...], consoleErrors: [...], error }
// Every request to another origin is aborted (and listed in `external`); `failed` lists the
// server's own requests that failed or answered >= 400. `operations` counts the rendered
// operations (Swagger UI's .opblock elements) once they appear; `loadMs` is the time from
// navigation to the first operation rendered. `ok`: at least one operation, no external
// request, nothing failed, no page or console error.
// Exit code 0 whenever the JSON was printed, 2 for bad stdin.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let input;
try {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  input = JSON.parse(text);
  if (typeof input.url !== 'string') throw new Error('need url');
} catch (err) {
  process.stderr.write(`docs_page.mjs: bad stdin: ${err.message}\n`);
  process.exit(2);
}

const origin = new URL(input.url).origin;
const result = { ok: false, title: null, operations: 0, loadMs: null, external: [], failed: [], pageErrors: [],
  consoleErrors: [], error: null };
const userDataDir = mkdtempSync(join(tmpdir(), 'docs-page-'));
const context = await chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, args: ARGS });
try {
  const page = await context.newPage();
  await page.route('**/*', route => {
    const url = route.request().url();
    if (url.startsWith(origin + '/') || url.startsWith('data:')) return route.continue();
    result.external.push(url);
    return route.abort('internetdisconnected');
  });
  page.on('response', response => {
    if (response.url().startsWith(origin) && response.status() >= 400) {
      result.failed.push({ url: response.url(), status: response.status() });
    }
  });
  page.on('requestfailed', request => {
    if (request.url().startsWith(origin)) result.failed.push({ url: request.url(), error: request.failure()?.errorText });
  });
  page.on('pageerror', err => result.pageErrors.push(String(err)));
  page.on('console', message => { if (message.type() === 'error') result.consoleErrors.push(message.text()); });
  const started = Date.now();
  await page.goto(input.url, { waitUntil: 'domcontentloaded' });
  await page.waitForSelector('.opblock', { timeout: input.timeoutMs ?? 30000 });
  result.loadMs = Date.now() - started;
  await page.waitForLoadState('networkidle');
  result.operations = await page.locator('.opblock').count();
  result.title = await page.title();
  result.ok = result.operations > 0 && result.external.length === 0 && result.failed.length === 0
    && result.pageErrors.length === 0 && result.consoleErrors.length === 0;
} catch (err) {
  result.error = String(err);
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(result) + '\n');
