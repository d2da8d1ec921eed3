/**
 * Reopens, in a process of its own, a data directory whose runtime was SIGKILLed with its provider in a socket host
 * (see crashWithApprovalPending), with the flags given. Then either closes it and prints `closed` once close()
 * returned (nothing else keeps this process alive: it exits by itself only if close() settles), or, with `hold`,
 * prints `ready` once recovery is durable and waits to be SIGKILLed in turn.
 * Usage: reopenChild.ts <dir> <flags as JSON> [hold]
 */
import { World } from "../model/world.js";

const [dir, flagsJson, hold] = process.argv.slice(2);
if (!dir || !flagsJson) throw new Error("usage: reopenChild.ts <dir> <flags-json> [hold]");
const world = await World.open(JSON.parse(flagsJson), ["main"], {}, dir, { hosted: true });
await world.settle();
if (hold === "hold") {
  process.stdout.write("ready\n");
  setInterval(() => undefined, 60_000);
} else {
  await world.close();
  process.stdout.write("closed\n");
}
