/**
 * A runtime in its own process whose run waits on an approval, with its provider in a host
 * process. Prints every durable event as "<seq> <type>", then "host <pid>" once the request is
 * durable, and waits to be SIGKILLed (leaving the host behind as an orphan).
 */

import { hosted } from "./helpers.js";
import { openRuntime } from "../support/internals.js";

const [dataDir] = process.argv.slice(2);
if (!dataDir) throw new Error("usage: runtimeChild.ts <dataDir>");
setInterval(() => undefined, 1 << 30);
// A WebSocket host does not notice its parent dying (a stdio host sees its stdin end and exits): a true orphan.
const adapter = hosted({ transport: "websocket" });
const rt = await openRuntime({ dataDir, providers: { s: adapter } });
rt.subscribe({ afterSeq: 0 }, (record) => {
  process.stdout.write(`${record.seq} ${record.event.type}\n`);
  if (record.event.type === "request.opened") {
    const [sessionId] = rt.views.sessions.keys();
    process.stdout.write(`host ${adapter.hostPid(sessionId!)}\n`);
  }
});
const { threadId } = await rt.createThread({ providerTarget: "s", title: "crash" });
await rt.sendMessage({ threadId, text: "[ask] then die" });
