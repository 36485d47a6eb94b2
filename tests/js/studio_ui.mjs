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
//     externalRequests:[{method,url,resourceType}] (cross-origin; answered locally),
//     expectedNewThread404s:[url] (the one allowed 404),
//     replyText, finalUrl, error }
//
// Steps: open baseUrl/ and wait for the agent's name in the agent list; if threadId, open
// /agents/<agentId>/threads/<threadId> (the Studio's thread route; /agents/:id/chat/:tid
// redirects there) and wait for expectThreadText (a substring) and expectThreadExactText (a
// whole element's text, e.g. a tool badge); type sendText in the composer, press
// Enter, wait for the user bubble and a NEW "[local model]" reply, wait for the chat POST
// to finish, then settle so follow-up refetches are recorded too.
//
// What is recorded as a failure, how cross-origin requests are answered, and the one allowed
// 404 (the new chat's thread): studio_browser.mjs.
//
// Exit code 0 whenever the JSON was printed (also when ok=false), 2 for bad stdin.
import { StudioBrowser, newReport, readStdin, step, titleCase } from './studio_browser.mjs';

const REPLY_PREFIX = '[local model]';

let input;
try {
  input = await readStdin(['baseUrl', 'agentId', 'sendText']);
} catch (err) {
  process.stderr.write(`studio_ui.mjs: bad stdin: ${err.message}\n`);
  process.exit(2);
}

const timeout = input.timeoutMs ?? 30000;
const settleMs = input.settleMs ?? 1500;
const agentName = input.agentName || titleCase(input.agentId);
const out = newReport({ steps: [], replyText: null, finalUrl: null });
const browser = new StudioBrowser(out, { base: input.baseUrl, agentId: input.agentId, knownThreadIds: [input.threadId],
  timeout, agentSignals: input.agentSignals });
const base = browser.base;

try {
  const page = await browser.open();

  await step(out, 'open studio', async () => {
    await page.goto(`${base}/`, { waitUntil: 'domcontentloaded' });
    // The agent list shows each agent by name (as a link to its page).
    await page.getByText(agentName, { exact: true }).first().waitFor({ state: 'visible' });
    return { url: page.url() };
  });

  if (input.threadId) {
    await step(out, 'open thread', async () => {
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
    await step(out, 'open agent chat', async () => {
      await page.getByText(agentName, { exact: true }).first().click();
      await page.waitForURL(browser.threadRoute);
      browser.noteUrl(page.url());
      return { url: page.url() };
    });
  }

  const replies = page.getByText(REPLY_PREFIX, { exact: false });
  const composer = page.getByPlaceholder('Enter your message...')
    .or(page.getByRole('textbox', { name: /message/i })).first();
  let before = 0;
  let chatResponse;
  await step(out, 'send message', async () => {
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
    browser.threadExistsFrom(Date.now());
    return { repliesBefore: before, chatRoute: new URL(chatResponse.url()).pathname, status: chatResponse.status() };
  });

  await step(out, 'wait for reply', async () => {
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

  await step(out, 'settle', async () => {
    await page.waitForTimeout(settleMs);
    return { url: page.url() };
  });
} catch (err) {
  out.error = err.message;
} finally {
  browser.finish();
  await browser.close(input.screenshotPath);
}
process.stdout.write(JSON.stringify(out) + '\n');
