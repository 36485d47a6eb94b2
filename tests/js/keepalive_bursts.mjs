// Bursts of requests over Node's keep-alive agent, separated by pauses, counting resets.
//
// stdin: ONE JSON object
//   { url (e.g. http://127.0.0.1:8787/health), burst (parallel requests per burst, default 8),
//     pausesMs: [4900, 4950, ...] (one pause before each burst after the first),
//     method? (default GET), agentTimeoutMs? (the agent's idle-socket timeout; Node's
//     globalAgent uses 5000. Only with one does Node obey the server's Keep-Alive: timeout=N
//     hint, closing an idle socket a second before the server would) }
// stdout: ONE JSON line
//   { requests, ok, resets, errors: [{burst, code, message}], reused, fresh,
//     keepAliveHeader, bursts: [{pauseMs, ok, resets, reused, fresh}] }
//
// The agent is `new http.Agent({keepAlive: true, maxSockets: burst})`, the pool a Node
// client (and the Studio's proxy) uses: idle sockets are reused for the next burst. A server
// that closes an idle socket just as the client reuses it makes that request fail with
// ECONNRESET ("socket hang up"); those are counted as resets. `reused` counts requests sent
// on a socket that had served an earlier request (`req.reusedSocket`), `fresh` the others.
// Exit code 0 whenever the JSON was printed, 2 for bad stdin.
import http from 'node:http';

async function readStdin() {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  return JSON.parse(text);
}

let input;
try {
  input = await readStdin();
  if (typeof input.url !== 'string' || !Array.isArray(input.pausesMs)) throw new Error('need url and pausesMs');
} catch (err) {
  process.stderr.write(`keepalive_bursts.mjs: bad stdin: ${err.message}\n`);
  process.exit(2);
}

const burst = input.burst ?? 8;
const agent = new http.Agent({ keepAlive: true, maxSockets: burst,
  ...(input.agentTimeoutMs ? { timeout: input.agentTimeoutMs } : {}) });
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const isReset = err => err.code === 'ECONNRESET' || /socket hang up/.test(err.message);
let keepAliveHeader = null;

function one() {
  return new Promise(resolve => {
    const req = http.request(input.url, { agent, method: input.method ?? 'GET' }, res => {
      keepAliveHeader = res.headers['keep-alive'] ?? keepAliveHeader;
      res.resume();
      res.on('end', () => resolve({ ok: res.statusCode < 500, reused: req.reusedSocket }));
      res.on('error', err => resolve({ ok: false, reused: req.reusedSocket, err }));
    });
    req.on('error', err => resolve({ ok: false, reused: req.reusedSocket, err }));
    req.end();
  });
}

const summary = { requests: 0, ok: 0, resets: 0, errors: [], reused: 0, fresh: 0, keepAliveHeader: null, bursts: [] };
const pauses = [0, ...input.pausesMs];
for (const [index, pauseMs] of pauses.entries()) {
  if (pauseMs) await sleep(pauseMs);
  const results = await Promise.all(Array.from({ length: burst }, one));
  const row = { pauseMs, ok: 0, resets: 0, reused: 0, fresh: 0 };
  for (const result of results) {
    summary.requests += 1;
    row.reused += result.reused ? 1 : 0;
    row.fresh += result.reused ? 0 : 1;
    if (result.ok) row.ok += 1;
    if (result.err) {
      if (isReset(result.err)) row.resets += 1;
      summary.errors.push({ burst: index, code: result.err.code ?? null, message: result.err.message });
    }
  }
  for (const key of ['ok', 'resets', 'reused', 'fresh']) summary[key] += row[key];
  summary.bursts.push(row);
}
summary.keepAliveHeader = keepAliveHeader;
agent.destroy();
process.stdout.write(JSON.stringify(summary) + '\n');
