// A real ACP v2 client (the official TypeScript SDK, `@agentclientprotocol/sdk/experimental/v2`)
// that drives an ACP agent over stdio and prints what it received, for the Python integration tests.
//
//   node client_v2.mjs <scenario>           a named scenario (see SCENARIOS)
//   node client_v2.mjs steps '<json list>'  any list of steps
//
// The agent command is the JSON array in $AGENT_META_AGENT (default: python3 -m agent_meta agent).
//
// Output: one JSON object per line, in the order things happened:
//   {"type":"recv","message":{...}}    every message the agent sent, raw (before SDK validation),
//                                      recorded synchronously in a TransformStream tap
//   {"type":"update","params":{...}}   a session/update as the SDK's handler received it (parsed)
//   {"type":"step","index":i,"op":...} a request is about to be sent
//   {"type":"response","index":i,"op":...,"result":...}   that request resolved
//   {"type":"done"} or {"type":"error","error":"..."}
// The "recv" line of a response always comes before its "response" marker, so the Python side can
// check what reached the client before each response from the "recv" lines alone.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk/experimental/v2";

const SCENARIOS = {
  // Metadata, then resume without and with replay: `_meta: null` then the snapshot each time.
  resume: [
    { op: "new" },
    { op: "prompt", text: "/title Plan\n/meta set a {\"x\":1}\n/meta set b [1,2]\n/meta rm b" },
    { op: "resume" },
    { op: "resume", replay: true },
  ],
  // The removal of a key the agent never published is still sent.
  "remove-unseen": [
    { op: "new" },
    { op: "prompt", text: "/meta set kept 1\n/meta rm never" },
    { op: "resume" },
  ],
  // A null nested inside a value is ordinary data; it survives the wire, the SDK and the resync.
  "nested-null": [
    { op: "new" },
    { op: "prompt", text: "/meta set k {\"a\":null,\"b\":{\"c\":null},\"d\":[null]}" },
    { op: "resume", replay: true },
  ],
  // Notification-level params._meta (needs integration/trace_agent.py): forwarded on that
  // frame only, never restored by a resync.
  "notification-meta": [
    { op: "new" },
    { op: "prompt", text: "/trace 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 a 1" },
    { op: "prompt", text: "/meta set b 2" },
    { op: "resume", replay: true },
  ],
  // Close ends the lifetime; resuming the closed session starts a fresh one.
  close: [
    { op: "new" },
    { op: "prompt", text: "/title Old\n/meta set a 1" },
    { op: "close" },
    { op: "resume", replay: true },
    { op: "prompt", text: "/meta set b 2" },
    { op: "resume" },
  ],
};

const out = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);

function parseArgs(argv) {
  const [name, json] = argv;
  if (name === "steps") return JSON.parse(json);
  if (!Object.hasOwn(SCENARIOS, name)) {
    throw new Error(`unknown scenario ${JSON.stringify(name)}; known: ${Object.keys(SCENARIOS).join(", ")}, steps`);
  }
  return SCENARIOS[name];
}

async function main() {
  const steps = parseArgs(process.argv.slice(2));
  const command = JSON.parse(process.env.AGENT_META_AGENT ?? '["python3", "-m", "agent_meta", "agent"]');
  const cwd = process.env.AGENT_META_CWD ?? process.cwd();
  const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));

  const base = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const tap = new TransformStream({
    transform(message, controller) {
      out({ type: "recv", message });
      controller.enqueue(message);
    },
  });
  const stream = { writable: base.writable, readable: base.readable.pipeThrough(tap) };

  const app = acp
    .client({ name: "agent-meta-integration", version: "0" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      out({ type: "update", params }); // synchronous: recorded before anything can reorder it
    });

  await app.connectWith(stream, async (ctx) => {
    const init = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: 2,
      info: { name: "agent-meta-integration", version: "0" },
      capabilities: {},
    });
    out({ type: "response", index: -1, op: "initialize", result: init });
    let sessionId = null;
    for (const [index, step] of steps.entries()) {
      out({ type: "step", index, ...step });
      let result;
      switch (step.op) {
        case "new":
          result = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
          sessionId = result.sessionId;
          break;
        case "prompt":
          result = await ctx.request(acp.methods.agent.session.prompt, {
            sessionId,
            prompt: [{ type: "text", text: step.text }],
          });
          break;
        case "resume": {
          const params = { sessionId, cwd };
          if (step.replay) params.replayFrom = { type: "start" };
          result = await ctx.request(acp.methods.agent.session.resume, params);
          break;
        }
        case "close":
          result = await ctx.request(acp.methods.agent.session.close, { sessionId });
          break;
        default:
          throw new Error(`unknown step op ${JSON.stringify(step.op)}`);
      }
      out({ type: "response", index, op: step.op, result: result ?? null });
    }
  });
  child.stdin.end();
  const { code, signal } = await exited;
  out({ type: "done", agentExit: code, agentSignal: signal });
}

const watchdog = setTimeout(() => {
  out({ type: "error", error: "timed out after 30 s" });
  process.exit(3);
}, 30_000);
watchdog.unref();

main().catch((error) => {
  out({ type: "error", error: String(error?.stack ?? error) });
  process.exitCode = 1;
  // The agent may still be running; do not wait for it.
  setImmediate(() => process.exit(1));
});
