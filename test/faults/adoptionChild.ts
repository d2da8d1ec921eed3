/**
 * A runtime in its own process whose run waits on an approval, with its provider in a socket
 * host (which outlives this process). Prints "host <pid>" once the request is durable, and
 * waits to be SIGKILLed (leaving the host for the next runtime to adopt).
 */

import { adoptable } from "./adoptionHelpers.js";
import { openRuntime } from "../support/internals.js";

const [dataDir] = process.argv.slice(2);
if (!dataDir) throw new Error("usage: adoptionChild.ts <dataDir>");
setInterval(() => undefined, 1 << 30);
const adapter = adoptable();
const rt = await openRuntime({ dataDir, providers: { s: adapter } });
rt.subscribe({ afterSeq: 0 }, (record) => {
  if (record.event.type !== "request.opened") return;
  const [sessionId] = rt.views.sessions.keys();
  process.stdout.write(`host ${adapter.hostPid(sessionId!)}\n`);
});
const { threadId } = await rt.createThread({ providerTarget: "s", title: "adopted" });
await rt.sendMessage({ threadId, text: "[ask] then die" });
