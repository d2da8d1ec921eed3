/**
 * An embedding process whose scripted host goes haywire: with a run in flight, the host
 * writes `<mib>` MiB with no newline on `<stream>` (stdout, stderr, or one WebSocket
 * message). Prints one JSON line per step ("flooded", "failed", "recovered") and exits 0.
 * Run in a child process, so that a runtime that cannot survive it takes down only this
 * process (the old readline channel died here of `RangeError: Invalid string length`).
 *
 *   node --import tsx test/faults/hostLineChild.ts <dataDir> <stdio|websocket> <stdout|stderr|websocket> <mib>
 */

import { hosted } from "./helpers.js";
import { nextEvent } from "../support/runtime.js";
import { openRuntime } from "../support/internals.js";

const [dataDir, transport, stream, mib] = process.argv.slice(2);
if (!dataDir || (transport !== "stdio" && transport !== "websocket") || !stream || !mib)
  throw new Error("usage: hostLineChild.ts <dataDir> <transport> <stream> <mib>");

const say = (step: string, fields: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify({ step, ...fields })}\n`);

const adapter = hosted({ transport });
const rt = await openRuntime({ dataDir, providers: { s: adapter } });
const { threadId } = await rt.createThread({ providerTarget: "s", title: "flood" });
const { runId } = await rt.sendMessage({ threadId, text: "[gate] wait here" });
// The gate holds the turn: the text before it is durable, so the run is in flight on the host.
await nextEvent(rt, "node.delta", (e) => e.runId === runId);
const [sessionId] = rt.views.sessions.keys();
const pid = adapter.hostPid(sessionId!);
const lost = nextEvent(rt, "session.state", (e) => e.sessionId === sessionId && e.status === "error");
await adapter.debug("debug.flood", { stream, bytes: Number(mib) * 1024 * 1024 });
say("flooded", { pid });

const failed = await rt.waitForRun(runId);
say("failed", { status: failed.status, failure: failed.failure, report: (await lost).event.message });

// The target still serves: a new run starts a new host.
const second = await rt.waitForRun((await rt.sendMessage({ threadId, text: "again" })).runId);
const [, newSession] = rt.views.sessions.keys();
say("recovered", { status: second.status, pid: adapter.hostPid(newSession ?? sessionId!), alive: true });
await rt.close();
process.exit(0);
