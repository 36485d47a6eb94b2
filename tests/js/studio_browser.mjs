// The real Mastra Studio in Debian's headless chromium, as studio_ui.mjs and studio_pages.mjs
// drive it: one fresh profile, every cross-origin request answered locally, and a record of
// what the page did.
//
// Recorded into the report (`newReport()`):
//   failedRequests  every request whose URL contains "/api/" that failed at network level or
//                   answered >= 400 (except the one allowed 404, below)
//   consoleErrors   every console message of type error; pageErrors: every pageerror
//   requests        every /api response {method, url, status, body?}
//   abortedRequests /api requests the page cancelled itself (net::ERR_ABORTED: navigation,
//                   unmount, closing a stream); not failures
//   externalRequests cross-origin requests, answered locally: this machine (and CI) is
//                   offline. Images (the Studio's provider logos from https://models.dev) get
//                   an empty SVG; the npm registry (the Studio asks it whether each package of
//                   GET /api/system/packages is outdated) gets a package it knows nothing
//                   about, i.e. "not outdated"; anything else is aborted (and then shows up as
//                   a console error).
//
// The one allowed 404 (Mastra's memory routes; real Mastra answers it too): GET
// /api/memory/threads/<id> for the thread id the Studio made up for a brand-new chat. The
// new chat's page is /agents/<agentId>/threads/new, and the id shows in the page URL
// (/agents/<agentId>/threads/<id>) only once a message was sent, so candidates are held
// back and judged at the end (`finish()`): allowed only if <id> is not a known thread, was
// asked for from the new chat's page or appeared in the page URL, and the 404 was sent
// before the first chat message's response came back (`threadExistsFrom`: the server
// creates the thread while it handles that message, so a GET racing it may still miss the
// thread; once the response is back the thread exists, and a 404 is a bug). The browser's
// matching "Failed to load resource" console line is allowed with it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const NPM_REGISTRY = 'https://registry.npmjs.org';
// Requests that stay open by design; they never count as in flight.
const LONG_LIVED = /\/threads\/subscribe$/;

export async function readStdin(required) {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  const input = JSON.parse(text);
  for (const key of required) {
    if (typeof input[key] !== 'string' || !input[key]) throw new Error(`missing string field ${key}`);
  }
  return input;
}

export function titleCase(id) {
  return id.split(/[-_\s]+/).filter(Boolean).map(w => w[0].toUpperCase() + w.slice(1)).join(' ');
}

export function newReport(extra = {}) {
  return { ok: false, failedRequests: [], consoleErrors: [], pageErrors: [], requests: [], abortedRequests: [],
    externalRequests: [], expectedNewThread404s: [], error: null, ...extra };
}

export class StudioBrowser {
  // base: the studio's origin; agentId: whose new-chat thread ids are recognised; knownThreadIds:
  // threads that exist (a 404 for one is a failure); agentSignals true/false pins
  // window.MASTRA_AGENT_SIGNALS before page scripts run (false = POST /stream).
  constructor(out, { base, agentId = null, knownThreadIds = [], timeout = 30000, agentSignals } = {}) {
    this.out = out;
    this.base = base.replace(/\/+$/, '');
    this.origin = new URL(this.base).origin;
    this.agentId = agentId;
    this.known = new Set(knownThreadIds.filter(Boolean));
    this.timeout = timeout;
    this.agentSignals = agentSignals;
    this.newThreadIds = new Set();
    this.threadRoute = agentId ? new RegExp(`/agents/${encodeURIComponent(agentId)}/threads/([^/?#]+)`) : null;
    this.newChatPath = agentId ? `/agents/${encodeURIComponent(agentId)}/threads/new` : null;
    this.threadExistsAt = Infinity;
    this.held404 = [];  // {entry, id, at, fromNewChat}
    this.heldConsole = [];  // console errors about a held 404's URL
    this.inflight = new Set();
    this.lastApiActivity = Date.now();
    this.userDataDir = mkdtempSync(join(tmpdir(), 'studio-ui-chromium-'));
    this.context = null;
    this.page = null;
  }

  async open() {
    const out = this.out;
    this.context = await chromium.launchPersistentContext(this.userDataDir, {
      executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1400, height: 900 },
      timeout: this.timeout,
    });
    await this.context.route(url => new URL(url).origin !== this.origin, route => {
      const req = route.request();
      out.externalRequests.push({ method: req.method(), url: req.url(), resourceType: req.resourceType() });
      if (req.resourceType() === 'image') {
        return route.fulfill({ status: 200, contentType: 'image/svg+xml',
          body: '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>' });
      }
      if (req.url().startsWith(`${NPM_REGISTRY}/`)) {
        const name = decodeURIComponent(new URL(req.url()).pathname.slice(1));
        return route.fulfill({ status: 200, contentType: 'application/json',
          headers: { 'access-control-allow-origin': '*' },
          body: JSON.stringify({ name, 'dist-tags': {}, versions: {} }) });
      }
      return route.abort('blockedbyclient');
    });
    if (typeof this.agentSignals === 'boolean') {
      // index.html assigns window.MASTRA_AGENT_SIGNALS in an inline script: pin the property first.
      await this.context.addInitScript(v => {
        Object.defineProperty(window, 'MASTRA_AGENT_SIGNALS', { get: () => v, set: () => {}, configurable: false });
      }, String(this.agentSignals));
    }
    const page = this.context.pages()[0] ?? await this.context.newPage();
    page.setDefaultTimeout(this.timeout);
    this.page = page;

    page.on('framenavigated', frame => { if (frame === page.mainFrame()) this.noteUrl(frame.url()); });
    page.on('console', msg => {
      if (msg.type() !== 'error') return;
      const url = msg.location()?.url || '';
      const item = { text: msg.text(), url };
      if (/Failed to load resource/.test(item.text) && url.includes('/api/memory/threads/')) this.heldConsole.push(item);
      else out.consoleErrors.push(item);
    });
    page.on('pageerror', err => out.pageErrors.push(String(err?.stack || err)));
    const sentAt = new WeakMap();  // request -> {at, fromNewChat}
    const isApi = req => req.url().includes('/api/');
    const settled = req => {
      if (this.inflight.delete(req)) this.lastApiActivity = Date.now();
    };
    this.context.on('request', req => {
      sentAt.set(req, { at: Date.now(), fromNewChat: new URL(page.url()).pathname === this.newChatPath });
      if (isApi(req) && !LONG_LIVED.test(new URL(req.url()).pathname)) {
        this.inflight.add(req);
        this.lastApiActivity = Date.now();
      }
    });
    this.context.on('requestfinished', settled);
    this.context.on('requestfailed', req => {
      settled(req);
      if (!isApi(req)) return;
      const error = req.failure()?.errorText || 'failed';
      if (error === 'net::ERR_ABORTED') {
        out.abortedRequests.push({ method: req.method(), url: req.url() });
        return;
      }
      out.failedRequests.push({ method: req.method(), url: req.url(), status: null, error });
    });
    this.context.on('response', async res => {
      const req = res.request();
      if (!isApi(req)) return;
      const seen = { method: req.method(), url: req.url(), status: res.status() };
      if (req.method() !== 'GET' && req.postData()) seen.body = req.postData().slice(0, 500);
      out.requests.push(seen);
      if (res.status() < 400) return;
      const entry = { method: req.method(), url: req.url(), status: res.status() };
      if (req.method() !== 'GET' && req.postData()) entry.requestBody = req.postData().slice(0, 500);
      const id = this.newThread404Id(req.method(), req.url(), res.status());
      if (id !== null) this.held404.push({ entry, id, ...(sentAt.get(req) ?? { at: Date.now(), fromNewChat: false }) });
      else out.failedRequests.push(entry);
      try { entry.body = (await res.text()).slice(0, 500); } catch { /* body gone with the page */ }
    });
    return page;
  }

  noteUrl(url) {
    if (!this.threadRoute) return;
    const m = this.threadRoute.exec(new URL(url).pathname);
    if (m && m[1] !== 'new' && !this.known.has(decodeURIComponent(m[1]))) this.newThreadIds.add(decodeURIComponent(m[1]));
  }

  newThread404Id(method, url, status) {
    if (method !== 'GET' || status !== 404) return null;
    const m = /^\/api\/memory\/threads\/([^/]+)$/.exec(new URL(url).pathname);
    return m && !this.known.has(decodeURIComponent(m[1])) ? decodeURIComponent(m[1]) : null;
  }

  // The first chat message's response is back: the new thread exists from now on.
  threadExistsFrom(at) {
    this.threadExistsAt = Math.min(this.threadExistsAt, at);
  }

  // Until no /api request has been in flight for quietMs (at most capMs), counted from now at
  // the earliest: a page starts its requests only after it rendered. Long-lived streams
  // (thread subscriptions) do not count.
  async settle(quietMs = 800, capMs = 8000) {
    this.lastApiActivity = Math.max(this.lastApiActivity, Date.now());
    const until = Date.now() + capMs;
    while (Date.now() < until) {
      if (this.inflight.size === 0 && Date.now() - this.lastApiActivity >= quietMs) return true;
      await this.page.waitForTimeout(100);
    }
    return false;
  }

  // Judge the held 404s (see the header) and set out.ok; call once, at the end.
  finish() {
    const out = this.out;
    if (this.page) this.noteUrl(this.page.url());
    const allowedUrls = new Set();
    for (const { entry, id, at, fromNewChat } of this.held404) {
      if ((fromNewChat || this.newThreadIds.has(id)) && at < this.threadExistsAt) allowedUrls.add(entry.url);
      else out.failedRequests.push(entry);
    }
    for (const item of this.heldConsole) {
      if (!allowedUrls.has(item.url)) out.consoleErrors.push(item);
    }
    this.held404 = [];
    this.heldConsole = [];
    out.expectedNewThread404s = [...allowedUrls];
    const clean = out.failedRequests.length === 0 && out.consoleErrors.length === 0 && out.pageErrors.length === 0;
    if (!clean && !out.error) out.error = 'browser recorded failed /api requests, console errors or page errors';
    out.ok = clean && !out.error;
  }

  async close(screenshotPath) {
    try {
      if (this.page) {
        this.out.finalUrl = this.page.url();
        if (screenshotPath) await this.page.screenshot({ path: screenshotPath, fullPage: false });
      }
    } catch (err) {
      this.out.error = this.out.error || `screenshot: ${err.message}`;
    }
    try { await this.context?.close(); } catch { /* already gone */ }
    rmSync(this.userDataDir, { recursive: true, force: true });
  }
}

// Run fn as a named step of out.steps, timing it; a failure names the step.
export async function step(out, name, fn) {
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
