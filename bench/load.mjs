// The load generator of bench/workload.py: Node's own http client with keep-alive sockets,
// so the client is not what limits a fast server (Python's httpx tops out near the bare
// server's rate on this machine). No dependencies: node bench/load.mjs '<json spec>'.
//
// Spec: {mode, base, ...}; prints one JSON line {done, wallMs, latenciesMs}.
//   turns: `clients` loops, each on its own conversation (`threads[i]`, or a new id per
//          turn when `fresh`), for `seconds` or `count` turns each; POST /api/chat read to [DONE].
//          With more threads than clients, client i takes turns on threads i, i + clients,
//          i + 2 * clients, ... in a cycle (so two clients never share a thread when the
//          count of threads is a multiple of the clients'). `threadCount` (with `threadPrefix`)
//          names the threads `<prefix>-<n>` instead of listing them. `chatPath` posts elsewhere;
//          `format: "mastra"` sends Mastra's agent-run body instead of the AI SDK chat body
//          ({messages, memory: {thread, resource}}: POST /api/agents/<id>/stream, on our studio
//          and on Mastra's server alike).
//   burst: `clients` first turns on new conversations sent at once.
//   get:   `count` sequential GETs of `path`.
//   post:  `count` POSTs of `body` to `path` from `clients` loops (`{i}` in body is the index);
//          each answer must be a success, or `status` when given (a refusal measured on purpose).
import http from "node:http";
import { randomUUID } from "node:crypto";

const spec = JSON.parse(process.argv[2]);
// `bases` (several replicas): client i talks to bases[i % bases.length]; else `base`
const bases = (spec.bases ?? [spec.base]).map((b) => new URL(b));
const agent = new http.Agent({ keepAlive: true, maxSockets: Math.max(1, spec.clients ?? 1), noDelay: true });

function request(method, path, body, client = 0) {
  const base = bases[client % bases.length];
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(body);
    const req = http.request({
      agent, host: base.hostname, port: base.port, method, path,
      headers: payload ? { "content-type": "application/json", "content-length": payload.length } : {},
    }, (res) => {
      const chunks = [];
      res.on("data", (chunk) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
      res.on("error", reject);
    });
    req.on("error", reject);
    if (payload) req.write(payload);
    req.end();
  });
}

function chatBody(conversation, text) {
  if (spec.format === "mastra") {
    return JSON.stringify({ messages: [{ role: "user", content: text }],
      memory: { thread: conversation, resource: spec.resource ?? "bench" } });
  }
  return JSON.stringify({
    id: "bench", trigger: "submit-message", conversationId: conversation,
    messages: [{ id: randomUUID(), role: "user", parts: [{ type: "text", text }] }],
  });
}

async function turn(conversation, client = 0) {
  const started = performance.now();
  const res = await request("POST", spec.chatPath ?? "/api/chat", chatBody(conversation, spec.text ?? "hello"),
    client);
  if (res.status !== 200 || !res.body.trimEnd().endsWith("data: [DONE]")) {
    throw new Error(`turn failed: ${res.status} ${res.body.slice(-200)}`);
  }
  return performance.now() - started;
}

async function timed(method, path, body, status) {
  const started = performance.now();
  const res = await request(method, path, body);
  if (status === undefined ? res.status >= 300 : res.status !== status) throw new Error(`${method} ${path}: ${res.status} ${res.body.slice(0, 200)}`);
  return performance.now() - started;
}

async function main() {
  const latencies = [];
  const started = performance.now();
  if (spec.mode === "turns") {
    const threads = spec.threads ?? Array.from({ length: spec.threadCount }, (_, n) => `${spec.threadPrefix}-${n}`);
    const stopAt = spec.seconds ? started + spec.seconds * 1000 : Infinity;
    const count = spec.count ?? Infinity;
    await Promise.all(Array.from({ length: spec.clients }, async (_, i) => {
      for (let n = 0; n < count && performance.now() < stopAt; n++) {
        const thread = spec.fresh ? randomUUID() : threads[(i + n * spec.clients) % threads.length];
        latencies.push(await turn(thread, i));
      }
    }));
  } else if (spec.mode === "burst") {
    latencies.push(...await Promise.all(Array.from({ length: spec.clients }, () => turn(randomUUID()))));
  } else if (spec.mode === "get") {
    for (let n = 0; n < spec.count; n++) latencies.push(await timed("GET", spec.path));
  } else if (spec.mode === "post") {
    let next = 0;
    await Promise.all(Array.from({ length: spec.clients }, async () => {
      while (next < spec.count) {
        const i = next++;
        latencies.push(await timed("POST", spec.path, spec.body.replaceAll("{i}", String(i)), spec.status));
      }
    }));
  } else {
    throw new Error(`unknown mode ${spec.mode}`);
  }
  const wallMs = performance.now() - started;
  process.stdout.write(JSON.stringify({ done: latencies.length, wallMs, latenciesMs: latencies }) + "\n");
  agent.destroy();
}

main().catch((err) => { console.error(err.stack ?? String(err)); process.exit(1); });
