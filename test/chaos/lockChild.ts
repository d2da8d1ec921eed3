/**
 * One contender in the lock race, driven line by line over stdin by test/chaos/lock.test.ts.
 * It races on several directories ("lanes") at once, so one pipe round trip serves several
 * tries: `go` tries to take the lock on every lane together and answers one word per lane,
 * `won` or `lost` (or `error:<code>`); `release` gives back what it holds and answers
 * `released`. It warms up on a private directory first (the first acquisition reads /proc
 * once) and says `ready`, so every round starts equal.
 */
import { createInterface } from "node:readline";
import { acquireDataDirLock, type DataDirLock } from "../../src/runtime/store/lock.js";

const [warmDir, ...lanes] = process.argv.slice(2);
if (!warmDir || lanes.length === 0) throw new Error("usage: lockChild.ts <warmDir> <laneDir>...");

await (await acquireDataDirLock(warmDir)).release();
const say = (line: string) => process.stdout.write(line + "\n");
let held: DataDirLock[] = [];
say("ready");
for await (const line of createInterface({ input: process.stdin })) {
  if (line === "go") {
    const tries = await Promise.allSettled(lanes.map((lane) => acquireDataDirLock(lane)));
    held = tries.flatMap((t) => (t.status === "fulfilled" ? [t.value] : []));
    say(
      tries
        .map((t) => {
          if (t.status === "fulfilled") return "won";
          const code = (t.reason as { code?: string }).code;
          return code === "data_dir_locked" ? "lost" : `error:${code ?? String(t.reason).replace(/\s+/g, "_")}`;
        })
        .join(" "),
    );
  } else if (line === "release") {
    await Promise.all(held.map((lock) => lock.release()));
    held = [];
    say("released");
  }
}
