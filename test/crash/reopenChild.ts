/**
 * Reopens, in a process of its own, a data directory whose runtime was SIGKILLed with its provider in a socket host
 * (see crashWithApprovalPending), with the flags given; closes it, and prints `closed` once close() returned.
 * Nothing else keeps this process alive: it exits by itself only if close() settles.
 * Usage: reopenChild.ts <dir> <flags as JSON>
 */
import { World } from "../model/world.js";

const [dir, flagsJson] = process.argv.slice(2);
if (!dir || !flagsJson) throw new Error("usage: reopenChild.ts <dir> <flags-json>");
const world = await World.open(JSON.parse(flagsJson), ["main"], {}, dir, { hosted: true });
await world.settle();
await world.close();
process.stdout.write("closed\n");
