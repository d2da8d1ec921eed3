// A stand-in ACP agent for the hostile tests (test/acp/hostile.test.ts): newline-delimited JSON-RPC 2.0 on stdio,
// scripted per test by a JSON file named in FAKE_ACP_SCRIPT (its shape: `FakeScript` in fakeAgent.ts). It is no real
// agent: it answers `initialize`, `session/new`, `session/load` and `session/close` as the script says (or plainly),
// plays the script's actions for each `session/prompt`, refuses any other request (`-32601`, as a real agent does the
// runtime's liveness probe) and logs every line it reads and writes to the script's log, so a test can say what the
// client sent. Plain JavaScript: the runtime starts it with `node` alone.
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";

const script = JSON.parse(readFileSync(process.env.FAKE_ACP_SCRIPT, "utf8"));
if (script.pidFile) writeFileSync(script.pidFile, String(process.pid));

/** Only the start of a line is logged (a flood is megabytes). */
const log = (d, line) => {
  if (script.log) appendFileSync(script.log, `${JSON.stringify({ d, line: line.slice(0, 4096), t: Date.now() })}\n`);
};

process.stdout.on("error", () => process.exit(0)); // the client is gone
const write = (text) => {
  for (const line of text.split("\n").slice(0, -1)) log("out", line);
  return process.stdout.write(text);
};

/**
 * A message's fields with the script's placeholders filled: "$id" (the request's id), "$idString" (the same as a
 * string), "$session", "$n" (the prompt's number).
 */
function fill(value, vars) {
  if (typeof value === "string") {
    if (value.startsWith("$") && Object.hasOwn(vars, value)) return vars[value];
    return value.replace(/\$(idString|id|session|n)\b/g, (name) => String(vars[name] ?? ""));
  }
  if (Array.isArray(value)) return value.map((v) => fill(v, vars));
  if (value && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, vars)]));
  return value;
}

/** What the client sent that an action waits for. */
const received = [];
let waiters = [];
const settle = () => {
  waiters = waiters.filter((w) => {
    if (!w.done()) return true;
    w.resolve();
    return false;
  });
};
const waitUntil = (done) =>
  new Promise((resolve) => {
    waiters.push({ done, resolve });
    settle();
  });
const repliesTo = (id) => received.filter((m) => !("method" in m) && m.id === id);

const DEFAULT_OPTIONS = [
  { optionId: "allow", name: "Allow", kind: "allow_once" },
  { optionId: "always", name: "Always", kind: "allow_always" },
  { optionId: "reject", name: "Reject", kind: "reject_once" },
];

/** One action's lines (none for a wait). */
function linesOf(action, vars) {
  const rpc = (m) => `${JSON.stringify({ jsonrpc: "2.0", ...m })}\n`;
  const update = (u) => rpc({ method: "session/update", params: { sessionId: vars.$session, update: u } });
  if ("send" in action) return rpc(fill(action.send, vars));
  if ("raw" in action) return `${fill(action.raw, vars)}\n`;
  if ("reply" in action) return rpc({ id: vars.$id, result: fill(action.reply, vars) });
  if ("replyError" in action) return rpc({ id: vars.$id, error: action.replyError });
  if ("update" in action) return update(fill(action.update, vars));
  if ("text" in action)
    return update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: fill(action.text, vars) } });
  if ("permission" in action) {
    const p = action.permission;
    return rpc({
      id: p.id,
      method: "session/request_permission",
      params: {
        sessionId: p.sessionId ?? vars.$session,
        toolCall: fill(p.toolCall, vars),
        options: p.options ?? DEFAULT_OPTIONS,
      },
    });
  }
  if ("withdraw" in action) return rpc({ method: "$/cancel_request", params: { requestId: action.withdraw } });
  return "";
}

/** Plays a list of actions in order (a prompt the client cancelled stops, where the script says so). */
async function play(actions, vars) {
  for (const action of actions) {
    if (vars.$cancelled) return;
    if ("group" in action) {
      write(action.group.map((a) => linesOf(a, vars)).join(""));
      continue;
    }
    if ("sleep" in action) await new Promise((r) => setTimeout(r, action.sleep));
    else if ("waitReply" in action) await waitUntil(() => repliesTo(action.waitReply).length >= (action.count ?? 1));
    // What came since the request began: a cancel of an earlier prompt is not this one's.
    else if ("waitMethod" in action)
      await waitUntil(() => received.slice(vars.$since ?? 0).some((m) => m.method === action.waitMethod));
    else if ("exit" in action) process.exit(action.exit);
    else if ("kill" in action) process.kill(process.pid, action.kill);
    else if ("flood" in action) await flood(action.flood);
    else write(linesOf(action, vars));
  }
}

/** `bytes` of a line that never ends (then nothing: the client must cut the agent off). */
async function flood(bytes) {
  const chunk = Buffer.alloc(64 * 1024, 0x78);
  log("out", `(flood of ${bytes} bytes, no newline)`);
  for (let sent = 0; sent < bytes; sent += chunk.length) {
    if (!process.stdout.write(chunk)) await new Promise((r) => process.stdout.once("drain", r));
  }
}

const INIT = { protocolVersion: 1, agentCapabilities: { loadSession: true }, authMethods: [] };
let sessions = 0;
/** Prompts are counted across the agent's lives (a restarted agent plays on where the killed one stopped). */
const nextPrompt = () => {
  let n = 0;
  try {
    n = Number(readFileSync(script.counterFile, "utf8"));
  } catch {
    // the first prompt
  }
  writeFileSync(script.counterFile, String(n + 1));
  return n;
};

/** Prompts in flight by session: with `autoCancel`, a `session/cancel` ends its session's at once, cancelled. */
const running = new Map();

function onNotification(message) {
  if (message.method !== "session/cancel" || !script.autoCancel) return;
  const vars = running.get(message.params?.sessionId);
  if (!vars || vars.$cancelled) return;
  vars.$cancelled = true;
  running.delete(message.params.sessionId);
  write(`${JSON.stringify({ jsonrpc: "2.0", id: vars.$id, result: { stopReason: "cancelled" } })}\n`);
}

function onRequest(message) {
  const vars = { $id: message.id, $session: message.params?.sessionId, $since: received.length - 1 };
  switch (message.method) {
    case "initialize":
      return play(script.initialize ?? [{ reply: INIT }], vars);
    case "session/new":
      vars.$session = `s${++sessions}`;
      return play(script.newSession ?? [{ reply: { sessionId: "$session" } }], vars);
    case "session/load":
    case "session/close":
      return play([{ reply: {} }], vars);
    case "session/prompt": {
      const n = nextPrompt();
      vars.$n = n;
      vars.$idString = String(message.id);
      const all = script.prompts ?? [];
      running.set(vars.$session, vars);
      return play(all[n] ?? all.at(-1) ?? [{ reply: { stopReason: "end_turn" } }], vars).finally(() => {
        if (running.get(vars.$session) === vars) running.delete(vars.$session);
      });
    }
    default:
      write(
        `${JSON.stringify({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "Method not found" } })}\n`,
      );
  }
}

let pending = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  pending += chunk;
  let at;
  while ((at = pending.indexOf("\n")) >= 0) {
    const line = pending.slice(0, at);
    pending = pending.slice(at + 1);
    log("in", line);
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      continue;
    }
    received.push(message);
    if (typeof message.method === "string" && "id" in message) void onRequest(message);
    else if (typeof message.method === "string") onNotification(message);
    settle();
  }
});
process.stdin.on("end", () => process.exit(0));

void play(script.startup ?? [], {});
