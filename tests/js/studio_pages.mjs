// Walk every page of the real Mastra Studio's navigation in Debian's headless chromium.
//
// stdin: ONE JSON object
//   { baseUrl, agentName? (a name the agent list shows, to know the app is up; default
//     "Chat Agent"), agentId? (opened last as a new chat; its thread-id 404 is the allowed one),
//     extraPaths?: [path] (pages the sidebar hides but the Studio routes to, e.g. "/prompts",
//     which only the keyboard shortcut "g p" reaches without a CMS), timeoutMs? (default 30000),
//     quietMs? (default 800: how long no /api request may be in flight before a page counts as
//     loaded), expectPaths?: [path] (sidebar links to wait for before the links are read),
//     screenshotDir? }
// stdout: ONE JSON line
//   { ok, pages: [{path, name, via, requests, failedRequests, consoleErrors, pageErrors,
//     failureTexts, quiet}], steps, failedRequests, consoleErrors, pageErrors, requests,
//     abortedRequests, externalRequests, expectedNewThread404s, finalUrl, error }
//   requests on a page: how many /api responses arrived while it was the current page;
//   failureTexts: visible texts of the page that start with "Failed to load" (the Studio's
//   error state of a list); quiet: whether the page's requests settled before the cap.
//
// Steps: open baseUrl/, wait for agentName; unfold the sidebar's "More"; collect every link of
// the sidebar (the main navigation and its footer); click each in turn (the Studio's own
// client-side navigation, as a user does), wait for its URL and for its /api requests to
// settle; then open each of extraPaths by URL; then, with agentId, click that agent's row
// in the agent list (a new chat). Failures, external requests and the one allowed 404:
// studio_browser.mjs. A page with a failure text fails the walk too.
//
// Exit code 0 whenever the JSON was printed (also when ok=false), 2 for bad stdin.
import { join } from 'node:path';
import { StudioBrowser, newReport, readStdin, step } from './studio_browser.mjs';

let input;
try {
  input = await readStdin(['baseUrl']);
} catch (err) {
  process.stderr.write(`studio_pages.mjs: bad stdin: ${err.message}\n`);
  process.exit(2);
}

const timeout = input.timeoutMs ?? 30000;
const quietMs = input.quietMs ?? 800;
const agentName = input.agentName || 'Chat Agent';
const out = newReport({ pages: [], steps: [], finalUrl: null });
const browser = new StudioBrowser(out, { base: input.baseUrl, agentId: input.agentId, timeout });
const base = browser.base;
const SIDEBAR = 'nav[aria-label="Main"]';

function counts() {
  return { requests: out.requests.length, failedRequests: out.failedRequests.length,
    consoleErrors: out.consoleErrors.length, pageErrors: out.pageErrors.length };
}

async function failureTexts(page) {
  return page.evaluate(() => [...document.querySelectorAll('body *')]
    .filter(el => el.childElementCount === 0 && /^\s*Failed to load/i.test(el.textContent || '')
      && el.getClientRects().length > 0)
    .map(el => el.textContent.trim().slice(0, 200)));
}

// Visit one page with go() and record what happened while it was current.
async function visit(page, { path, name, via }, go) {
  const before = counts();
  await step(out, `${via} ${path}`, async () => {
    await go();
    await page.waitForTimeout(100);  // the click's render
    const quiet = await browser.settle(quietMs, 10000);
    const after = counts();
    const texts = await failureTexts(page);
    out.pages.push({
      path, name, via, url: page.url(), requests: after.requests - before.requests,
      failedRequests: out.failedRequests.slice(before.failedRequests),
      consoleErrors: out.consoleErrors.slice(before.consoleErrors),
      pageErrors: out.pageErrors.slice(before.pageErrors), failureTexts: texts, quiet,
    });
    if (input.screenshotDir) {
      await page.screenshot({ path: join(input.screenshotDir, `${path.replace(/[^a-z0-9]+/gi, '_') || 'root'}.png`) });
    }
    return { url: page.url() };
  });
}

try {
  const page = await browser.open();

  let links = [];
  await step(out, 'open studio', async () => {
    await page.goto(`${base}/`, { waitUntil: 'domcontentloaded' });
    await page.getByText(agentName, { exact: true }).first().waitFor({ state: 'visible' });
    const more = page.locator(SIDEBAR).getByRole('button', { name: 'More', exact: true });
    if (await more.count()) await more.first().click();
    // Some links show once the Studio's first queries answered (Tools, after /api/tools): on a
    // loaded machine that can be after the agent list shows.
    for (const path of input.expectPaths ?? []) {
      await page.locator(SIDEBAR).locator('..').locator(`a[href="${path}"]`).first().waitFor({ state: 'attached' });
    }
    // The sidebar: the main navigation and the footer (Settings, Resources) share its parent.
    links = await page.locator(SIDEBAR).evaluate(nav => [...nav.parentElement.querySelectorAll('a[href^="/"]')]
      .map(a => ({ path: a.getAttribute('href'), name: a.innerText.trim() })));
    links = links.filter((link, i) => links.findIndex(l => l.path === link.path) === i);
    if (links.length === 0) throw new Error('the sidebar has no links');
    await browser.settle(quietMs, 10000);
    return { links: links.length };
  });

  for (const link of links) {
    await visit(page, { ...link, via: 'click' }, async () => {
      await page.locator(SIDEBAR).locator('..').locator(`a[href="${link.path}"]`).first().click();
      await page.waitForURL(url => url.pathname === link.path || url.pathname.startsWith(`${link.path}/`));
    });
  }
  for (const path of input.extraPaths ?? []) {
    await visit(page, { path, name: null, via: 'open' }, async () => {
      await page.goto(`${base}${path}`, { waitUntil: 'domcontentloaded' });
      await page.locator(SIDEBAR).waitFor({ state: 'visible' });
    });
  }
  if (input.agentId) {
    const path = `/agents/${encodeURIComponent(input.agentId)}/threads/new`;
    await visit(page, { path, name: agentName, via: 'click' }, async () => {
      await page.locator(SIDEBAR).locator('..').locator('a[href="/agents"]').first().click();
      await page.getByText(agentName, { exact: true }).first().click();
      await page.waitForURL(browser.threadRoute);
      await page.getByPlaceholder('Enter your message...').first().waitFor({ state: 'visible' });
    });
  }
  const withTexts = out.pages.filter(p => p.failureTexts.length > 0);
  if (withTexts.length) out.error = `pages show a failure: ${withTexts.map(p => p.path).join(', ')}`;
} catch (err) {
  out.error = err.message;
} finally {
  browser.finish();
  await browser.close();
}
process.stdout.write(JSON.stringify(out) + '\n');
