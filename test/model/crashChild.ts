/**
 * A runtime in its own process, left with a run waiting on an approval (or, with `plain`, streaming and held at its
 * gate; with `both`, one of each on two threads; with `interrupted`, an approval whose run's interrupt never reaches
 * the provider): prints `ready <threadId>` (the first thread) once that is durable,
 * then waits to be SIGKILLed.
 * Usage: crashChild.ts <dir> <flags as JSON> [hosted] [approval|plain|both|interrupted]
 * (hosted: the provider runs in a host process that outlives it)
 */
import { World } from "./world.js";

const [dir, flagsJson, hosted, kind = "approval"] = process.argv.slice(2);
if (!dir || !flagsJson)
  throw new Error("usage: crashChild.ts <dir> <flags-json> [hosted] [approval|plain|both|interrupted]");
const world = await World.open(JSON.parse(flagsJson), ["main"], {}, dir, { hosted: hosted === "hosted" });
/** A run on a thread of its own, waiting on its approval or streaming at its gate. */
async function leaveRun(kind: string): Promise<string> {
  await world.createThread();
  await world.send(kind);
  if (kind === "approval")
    await world.until("the approval", () => world.rt.views.pendingRequests(world.threadId).length === 1);
  else await world.until("the streamed text", () => world.run().items.some((i) => i.text?.startsWith("working")));
  return world.threadId;
}

// `both`: an approval on the first thread, a streaming run on a second one. `interrupted`: an approval, and an
// interrupt of its run recorded that never reaches the provider.
const first = await leaveRun(kind === "both" || kind === "interrupted" ? "approval" : kind);
if (kind === "both") await leaveRun("plain");
if (kind === "interrupted") {
  world.hosts[0]!.interrupt = () => new Promise<void>(() => undefined);
  void world.rt.interrupt({ runId: world.runId });
  await world.until("the interrupt", () => world.run().items.some((i) => i.kind === "interrupt_request"));
  await world.rt.readThread(first);
} else await world.settle();
process.stdout.write(`ready ${first}\n`);
setInterval(() => undefined, 60_000);
