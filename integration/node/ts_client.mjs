// A real ACP client (the official TypeScript SDK) that drives an ACP agent over stdio and prints
// what it received, for the Python integration tests and the demo. It speaks ACP v2
// (`@agentclientprotocol/sdk/experimental/v2`) by default, and ACP v1 (the SDK's main entry) when
// $AGENT_META_ACP is 1.
//
//   node ts_client.mjs <scenario>           a named scenario (see SCENARIOS)
//   node ts_client.mjs steps '<json list>'  any list of steps
//
// The agent command is the JSON array in $AGENT_META_AGENT (default: python3 -m agent_meta agent).
// $AGENT_META_CLIENT_META, a JSON object, is the client capabilities' `_meta` (say, JetBrains AIR's
// {"jetbrains":{"air":{...}}}, for metadata an agent only sends to such clients).
//
// Output: one JSON object per line, in the order things happened:
//   {"type":"recv","message":{...}}    every message the agent sent, raw (before SDK validation),
//                                      recorded synchronously in a TransformStream tap
//   {"type":"sent","message":{...}}    every message this client sent the agent, as written
//   {"type":"update","params":{...}}   a session/update as the SDK's handler received it (parsed)
//   {"type":"step","index":i,"op":...} a request is about to be sent
//   {"type":"response","index":i,"op":...,"result":...}   that request resolved
//   {"type":"permission","params":{...}}  the agent asked session/request_permission
//   {"type":"done"} or {"type":"error","error":"..."}
// The "recv" line of a response always comes before its "response" marker, so the Python side can
// check what reached the client before each response from the "recv" lines alone. A v2 prompt is
// answered as soon as the agent accepts it; the "prompt" op waits on until the turn ends (the idle
// state_update with a stopReason) before writing its "response" marker. A v1 prompt is answered
// when its turn ends.
//
// Ops: new, prompt (whole turn), prompt-start (send it, wait for nothing), await-turn (the turn
// of the last prompt-start ends), await-permission (the agent's session/request_permission is
// pending), answer (reply to it with step.option), resume (step.replay: v2 replayFrom start; v1
// session/load instead of session/resume), close, set-title (the SDK's unstable session/set_title
// with step.title; on v2 the SDK checks the {title} result against its schema), list
// (session/list).

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

const VERSION = Number(process.env.AGENT_META_ACP ?? "2");
if (VERSION !== 1 && VERSION !== 2) throw new Error(`AGENT_META_ACP must be 1 or 2, not ${VERSION}`);
const ENTRY = VERSION === 1 ? "@agentclientprotocol/sdk" : "@agentclientprotocol/sdk/experimental/v2";
// session/set_title is unstable in the SDK (2.4.0): a scenario that uses it runs on the SDK's
// unstable entry, a superset of the stable one; every other scenario on the stable entry.
let acp;

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
  // Notification-level params._meta (the reference agent's /trace command): forwarded on that
  // frame only, never restored by a resync.
  "notification-meta": [
    { op: "new" },
    { op: "prompt", text: "/trace 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 a 1" },
    { op: "prompt", text: "/meta set b 2" },
    { op: "resume", replay: true },
  ],
  // An agent-to-client request: /ask waits for session/request_permission's answer.
  ask: [
    { op: "new" },
    { op: "prompt-start", text: "/ask Ship it?" },
    { op: "await-permission" },
    { op: "answer", option: "allow" },
    { op: "await-turn" },
  ],
  // session/close while a prompt runs: its final updates, then the close response, then nothing.
  "close-running": [
    { op: "new" },
    { op: "prompt", text: "/meta set a 1" },
    { op: "prompt-start", text: "/ask Close me?" },
    { op: "await-permission" },
    { op: "close" },
  ],
  // session/resume while a prompt runs: the real foreground state before the resume response.
  "resume-running": [
    { op: "new" },
    { op: "prompt", text: "/meta set a 1" },
    { op: "prompt-start", text: "/ask Resume me?" },
    { op: "await-permission" },
    { op: "resume", replay: true },
    { op: "answer", option: "reject" },
    { op: "await-turn" },
  ],
  // A client-set title (R13): confirmed, then answered; the agent's own /title never beats it,
  // in the live updates, the listing or the resync.
  "set-title": [
    { op: "new" },
    { op: "prompt", text: "/title Generated\n/meta set a 1" },
    { op: "set-title", title: "Mine" },
    { op: "prompt", text: "/title Generated again\n/meta set b 2" },
    { op: "list" },
    { op: "resume", replay: true },
    { op: "set-title", title: "Renamed" },
    { op: "list" },
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

/** Counters per key, and promises that resolve when a counter passes a value. */
class Waiters {
  counts = new Map();
  waiting = [];
  bump(key) {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    this.waiting = this.waiting.filter((w) => {
      if (this.counts.get(w.key) >= w.target) {
        w.resolve();
        return false;
      }
      return true;
    });
  }
  reached(key, target) {
    if ((this.counts.get(key) ?? 0) >= target) return Promise.resolve();
    return new Promise((resolve) => this.waiting.push({ key, target, resolve }));
  }
  /** Resolves at the next bump of `key` after this call. */
  next(key) {
    return this.reached(key, (this.counts.get(key) ?? 0) + 1);
  }
}

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
  acp = await import(steps.some((step) => step.op === "set-title") ? `${ENTRY}/unstable` : ENTRY);
  const command = JSON.parse(process.env.AGENT_META_AGENT ?? '["python3", "-m", "agent_meta", "agent"]');
  const cwd = process.env.AGENT_META_CWD ?? process.cwd();
  const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));

  const base = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const turns = new Waiters(); // ended turns (idle state_update with a stopReason) per session
  const tap = new TransformStream({
    transform(message, controller) {
      out({ type: "recv", message });
      const update = message?.params?.update;
      if (message?.method === "session/update" && update?.sessionUpdate === "state_update" && update.stopReason) {
        turns.bump(message.params.sessionId);
      }
      controller.enqueue(message);
    },
  });
  const permissions = new Waiters(); // pending session/request_permission, answered by "answer"
  let pending = null;
  const sentTap = new TransformStream({
    transform(message, controller) {
      out({ type: "sent", message });
      controller.enqueue(message);
    },
  });
  sentTap.readable.pipeTo(base.writable).catch(() => {}); // a closed pipe ends the run elsewhere
  const stream = { writable: sentTap.writable, readable: base.readable.pipeThrough(tap) };

  const app = acp
    .client({ name: "agent-meta-integration", version: "0" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      out({ type: "update", params }); // synchronous: recorded before anything can reorder it
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) => {
      out({ type: "permission", params });
      return new Promise((resolve) => {
        pending = { resolve };
        // $/cancel_request (the prompt was cancelled): the cancelled outcome, as ACP says.
        signal?.addEventListener("abort", () => resolve({ outcome: { outcome: "cancelled" } }));
        permissions.bump("any");
      });
    });

  await app.connectWith(stream, async (ctx) => {
    const clientInfo = { name: "agent-meta-integration", version: "0" };
    const capabilities = process.env.AGENT_META_CLIENT_META ? { _meta: JSON.parse(process.env.AGENT_META_CLIENT_META) } : {};
    const init = await ctx.request(
      acp.methods.agent.initialize,
      VERSION === 1
        ? { protocolVersion: 1, clientInfo, clientCapabilities: capabilities }
        : { protocolVersion: 2, info: clientInfo, capabilities },
    );
    out({ type: "response", index: -1, op: "initialize", result: init });
    let sessionId = null;
    let running = null;
    const prompt = (text) =>
      ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
    // v2: a turn ends with its idle state_update; v1: with the prompt's response.
    const turnEnd = (response) => (VERSION === 1 ? response : turns.next(sessionId));
    for (const [index, step] of steps.entries()) {
      out({ type: "step", index, ...step });
      let result;
      switch (step.op) {
        case "new":
          result = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
          sessionId = result.sessionId;
          break;
        case "prompt": {
          const response = prompt(step.text);
          const ended = turnEnd(response);
          result = await response;
          await ended;
          break;
        }
        case "prompt-start": {
          const response = prompt(step.text);
          running = { ended: turnEnd(response), response };
          break;
        }
        case "await-turn":
          result = await running.response;
          await running.ended;
          break;
        case "await-permission":
          await permissions.reached("any", 1);
          break;
        case "answer":
          pending.resolve({ outcome: { outcome: "selected", optionId: step.option } });
          pending = null;
          break;
        case "resume": {
          if (VERSION === 1 && step.replay) {
            const params = { sessionId, cwd, mcpServers: [] };
            result = await ctx.request(acp.methods.agent.session.load, params);
            break;
          }
          const params = { sessionId, cwd };
          if (step.replay) params.replayFrom = { type: "start" };
          result = await ctx.request(acp.methods.agent.session.resume, params);
          break;
        }
        case "close":
          result = await ctx.request(acp.methods.agent.session.close, { sessionId });
          break;
        case "set-title":
          result = await ctx.request(acp.methods.agent.session.setTitle, { sessionId, title: step.title });
          break;
        case "list":
          result = await ctx.request(acp.methods.agent.session.list, {});
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
