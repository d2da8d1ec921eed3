/**
 * A runtime in its own process, left with a run waiting on an approval: prints
 * `ready <threadId>` once the request is durable, then waits to be SIGKILLed.
 * Usage: crashChild.ts <dir> <flags as JSON>
 */
import { World } from "./world.js";

const [dir, flagsJson] = process.argv.slice(2);
if (!dir || !flagsJson) throw new Error("usage: crashChild.ts <dir> <flags-json>");
const world = await World.open(JSON.parse(flagsJson), ["main"], {}, dir);
await world.createThread();
await world.send("approval");
await world.until("the approval", () => world.rt.views.pendingRequests(world.threadId).length === 1);
await world.settle();
process.stdout.write(`ready ${world.threadId}\n`);
setInterval(() => undefined, 60_000);
