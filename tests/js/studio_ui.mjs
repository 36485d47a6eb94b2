// Drive the real Mastra Studio (served by the studio process) in Debian's headless chromium.
//
// stdin: ONE JSON object
//   { baseUrl, agentId, agentName?, threadId?, expectThreadText?, expectThreadExactText?, sendText,
//     screenshotPath?, timeoutMs? (per step, default 30000), settleMs? (default 1500),
//     agentSignals? (true/false overrides the page's MASTRA_AGENT_SIGNALS: false = POST /stream) }
//   agentName defaults to the title-cased agentId ("chat-agent" -> "Chat Agent").
// stdout: ONE JSON line
//   { ok, steps:[{name, ms, ...}], failedRequests:[{method,url,status,body?,requestBody?,error?}],
//     consoleErrors:[{text,url}], pageErrors:[...], requests:[{method,url,status}] (every /api response),
//     abortedRequests:[{method,url}] (net::ERR_ABORTED by the page itself; not failures),
//     externalRequests:[{method,url,resourceType}] (cross-origin; answered locally, see below),
//     expectedNewThread404s:[url] (the one allowed 404, see below),
//     replyText, finalUrl, error }
//
// Steps: open baseUrl/ and wait for the agent's name in the agent list; if threadId, open
// /agents/<agentId>/threads/<threadId> (the Studio's thread route; /agents/:id/chat/:tid
// redirects there) and wait for expectThreadText (a substring) and expectThreadExactText (a
// whole element's text, e.g. a tool badge); type sendText in the composer, press
// Enter, wait for the user bubble and a NEW "[local model]" reply, wait for the chat POST
// to finish, then settle so follow-up refetches are recorded too.
//
// Recorded as failures: every request whose URL contains "/api/" that failed at network
// level or answered >= 400, every console message of type error, every pageerror. Exactly
// one case is expected and skipped: GET /api/memory/threads/<id> -> 404 where <id> is a
// thread the Studio made up for a brand-new chat (Mastra's memory routes), i.e. an id that is
// not the given threadId and has appeared in the page URL as /agents/<agentId>/threads/<id>;
// the browser's matching "Failed to load resource" console error is skipped with it.
//
// Exit code 0 whenever the JSON was printed (also when ok=false), 2 for bad stdin.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const REPLY_PREFIX = '[local model]';

async function readStdin() {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  return JSON.parse(text);
}

function titleCase(id) {
  return id.split(/[-_\s]+/).filter(Boolean).map(w => w[0].toUpperCase() + w.slice(1)).join(' ');
}

let input;
try {
  input = await readStdin();
  for (const key of ['baseUrl', 'agentId', 'sendText']) {
    if (typeof input[key] !== 'string' || !input[key]) throw new Error(`missing string field ${key}`);
  }
} catch (err) {
  process.stderr.write(`studio_ui.mjs: bad stdin: ${err.message}\n`);
  process.exit(2);
}

const base = input.baseUrl.replace(/\/+$/, '');
const timeout = input.timeoutMs ?? 30000;
const settleMs = input.settleMs ?? 1500;
const agentName = input.agentName || titleCase(input.agentId);
const out = { ok: false, steps: [], failedRequests: [], consoleErrors: [], pageErrors: [], requests: [],
  abortedRequests: [], externalRequests: [], replyText: null, finalUrl: null, error: null };

// The one allowed 404 (Mastra's memory routes): GET /api/memory/threads/<id> for the thread id the
// Studio made up for a brand-new chat. It is requested before the id shows in the page URL, so
// candidates are held back and judged at the end: allowed only if <id> is not the given
// threadId, appeared in the page URL as /agents/<agentId>/threads/<id>, and the 404 was sent
// before the first chat message's response came back (the server creates the thread while it
// handles that message: a GET racing it may still miss the thread; once the response is
// back the thread exists, and a 404 is a bug).
const newThreadIds = new Set();
const threadRoute = new RegExp(`/agents/${encodeURIComponent(input.agentId)}/threads/([^/?#]+)`);
function noteUrl(url) {
  const m = threadRoute.exec(new URL(url).pathname);
  if (m && m[1] !== 'new' && m[1] !== input.threadId) newThreadIds.add(decodeURIComponent(m[1]));
}
function newThread404Id(method, url, status) {
  if (method !== 'GET' || status !== 404) return null;
  const m = /^\/api\/memory\/threads\/([^/]+)$/.exec(new URL(url).pathname);
  return m && decodeURIComponent(m[1]) !== input.threadId ? decodeURIComponent(m[1]) : null;
}
let threadExistsAt = Infinity;
const held404 = [];  // {entry, id, at}
const heldConsole = [];  // console errors about a held 404's URL
function judgeHeld() {
  const allowedUrls = new Set();
  for (const { entry, id, at } of held404) {
    if (newThreadIds.has(id) && at < threadExistsAt) allowedUrls.add(entry.url);
    else out.failedRequests.push(entry);
  }
  for (const item of heldConsole) {
    if (!allowedUrls.has(item.url)) out.consoleErrors.push(item);
  }
  out.expectedNewThread404s = [...allowedUrls];
}

async function step(name, fn) {
  const started = Date.now();
  const entry = { name };
  out.steps.push(entry);
  try {
    Object.assign(entry, (await fn()) ?? {});
    entry.ms = Date.now() - started;
  } catch (err) {
    entry.ms = Date.now() - started;
    entry.failed = true;
    throw new Error(`${name}: ${err.message.split('\n')[0]}`);
  }
}

const userDataDir = mkdtempSync(join(tmpdir(), 'studio-ui-chromium-'));
let context;
let page;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1400, height: 900 },
    timeout,
  });
  // The Studio loads provider logos from https://models.dev; this machine (and CI) is offline,
  // so every cross-origin request is answered locally and listed in externalRequests: images
  // get an empty SVG, anything else is aborted (and then shows up as a console error).
  await context.route(url => new URL(url).origin !== new URL(base).origin, route => {
    const req = route.request();
    out.externalRequests.push({ method: req.method(), url: req.url(), resourceType: req.resourceType() });
    if (req.resourceType() === 'image') {
      return route.fulfill({ status: 200, contentType: 'image/svg+xml',
        body: '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>' });
    }
    return route.abort('blockedbyclient');
  });
  if (typeof input.agentSignals === 'boolean') {
    // Override index.html's window.MASTRA_AGENT_SIGNALS (it is assigned by an inline script, so
    // pin the property before any page script runs) to test the other chat transport.
    const value = String(input.agentSignals);
    await context.addInitScript(v => {
      Object.defineProperty(window, 'MASTRA_AGENT_SIGNALS', { get: () => v, set: () => {}, configurable: false });
    }, value);
  }
  page = context.pages()[0] ?? await context.newPage();
  page.setDefaultTimeout(timeout);

  page.on('framenavigated', frame => { if (frame === page.mainFrame()) noteUrl(frame.url()); });
  page.on('console', msg => {
    if (msg.type() !== 'error') return;
    const url = msg.location()?.url || '';
    const item = { text: msg.text(), url };
    if (/Failed to load resource/.test(item.text) && url.includes('/api/memory/threads/')) heldConsole.push(item);
    else out.consoleErrors.push(item);
  });
  page.on('pageerror', err => out.pageErrors.push(String(err?.stack || err)));
  const sentAt = new WeakMap();
  context.on('request', req => sentAt.set(req, Date.now()));
  context.on('requestfailed', req => {
    if (!req.url().includes('/api/')) return;
    const error = req.failure()?.errorText || 'failed';
    // Requests the page cancels itself (navigation, unmount, closing a stream) are listed apart.
    if (error === 'net::ERR_ABORTED') {
      out.abortedRequests.push({ method: req.method(), url: req.url() });
      return;
    }
    out.failedRequests.push({ method: req.method(), url: req.url(), status: null, error });
  });
  context.on('response', async res => {
    const req = res.request();
    if (!req.url().includes('/api/')) return;
    const seen = { method: req.method(), url: req.url(), status: res.status() };
    if (req.method() !== 'GET' && req.postData()) seen.body = req.postData().slice(0, 500);
    out.requests.push(seen);
    if (res.status() < 400) return;
    const entry = { method: req.method(), url: req.url(), status: res.status() };
    if (req.method() !== 'GET' && req.postData()) entry.requestBody = req.postData().slice(0, 500);
    const id = newThread404Id(req.method(), req.url(), res.status());
    if (id !== null) held404.push({ entry, id, at: sentAt.get(req) ?? Date.now() });
    else out.failedRequests.push(entry);
    try { entry.body = (await res.text()).slice(0, 500); } catch { /* body gone with the page */ }
  });

  await step('open studio', async () => {
    await page.goto(`${base}/`, { waitUntil: 'domcontentloaded' });
    // The agent list shows each agent by name (as a link to its page).
    await page.getByText(agentName, { exact: true }).first().waitFor({ state: 'visible' });
    return { url: page.url() };
  });

  if (input.threadId) {
    await step('open thread', async () => {
      const url = `${base}/agents/${encodeURIComponent(input.agentId)}/threads/${encodeURIComponent(input.threadId)}`;
      await page.goto(url, { waitUntil: 'domcontentloaded' });
      if (input.expectThreadText) {
        await page.getByText(input.expectThreadText, { exact: false }).first().waitFor({ state: 'visible' });
      }
      if (input.expectThreadExactText) {
        await page.getByText(input.expectThreadExactText, { exact: true }).first().waitFor({ state: 'visible' });
      }
      return { url: page.url() };
    });
  } else {
    await step('open agent chat', async () => {
      await page.getByText(agentName, { exact: true }).first().click();
      await page.waitForURL(threadRoute);
      noteUrl(page.url());
      return { url: page.url() };
    });
  }

  const replies = page.getByText(REPLY_PREFIX, { exact: false });
  const composer = page.getByPlaceholder('Enter your message...')
    .or(page.getByRole('textbox', { name: /message/i })).first();
  let before = 0;
  let chatResponse;
  await step('send message', async () => {
    await composer.waitFor({ state: 'visible' });
    before = await replies.count();
    await composer.click();
    await composer.fill(input.sendText);
    const chatPost = page.waitForResponse(res => {
      const u = new URL(res.url());
      return res.request().method() === 'POST' && u.pathname.startsWith(`/api/agents/${input.agentId}/`)
        && /\/(stream|generate|send-message|network|stream-legacy|generate-legacy)$/.test(u.pathname);
    });
    await composer.press('Enter');
    chatResponse = await chatPost;
    threadExistsAt = Math.min(threadExistsAt, Date.now());
    return { repliesBefore: before, chatRoute: new URL(chatResponse.url()).pathname, status: chatResponse.status() };
  });

  await step('wait for reply', async () => {
    await page.getByText(input.sendText, { exact: false }).first().waitFor({ state: 'visible' });
    await page.waitForFunction(
      ([prefix, n]) => {
        const hits = [...document.querySelectorAll('body *')].filter(el =>
          el.childElementCount === 0 && el.textContent.includes(prefix));
        return hits.length > n;
      }, [REPLY_PREFIX, before], { timeout });
    await chatResponse.finished().catch(() => {});
    // Let the streamed text finish rendering (stable for two polls).
    let last = '';
    for (let i = 0; i < 40; i++) {
      const text = (await replies.last().innerText()).trim();
      if (text && text === last) break;
      last = text;
      await page.waitForTimeout(250);
    }
    out.replyText = last;
    return { replies: await replies.count() };
  });

  await step('settle', async () => {
    await page.waitForTimeout(settleMs);
    return { url: page.url() };
  });

  noteUrl(page.url());
  judgeHeld();
  out.ok = out.failedRequests.length === 0 && out.consoleErrors.length === 0 && out.pageErrors.length === 0;
  if (!out.ok) out.error = 'browser recorded failed /api requests, console errors or page errors';
} catch (err) {
  out.error = err.message;
  if (!out.expectedNewThread404s) judgeHeld();
} finally {
  try {
    if (page) {
      out.finalUrl = page.url();
      if (input.screenshotPath) await page.screenshot({ path: input.screenshotPath, fullPage: false });
    }
  } catch (err) {
    out.error = out.error || `screenshot: ${err.message}`;
  }
  try { await context?.close(); } catch { /* already gone */ }
  rmSync(userDataDir, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(out) + '\n');
