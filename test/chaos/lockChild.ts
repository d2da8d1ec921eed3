/**
 * One contender in the lock race, driven line by line over stdin by test/chaos/lock.test.ts.
 * It races on several directories ("lanes") at once, so one pipe round trip serves several
 * tries: `go` tries to take the lock on every lane together and answers one word per lane,
 * `won` or `lost` (or `error:<code>`); `release` gives back what it holds and answers
 * `released`. It warms up on a private directory first (the first load of the lock's addon) and
 * says `ready`, so every round starts equal. `churn <n> <journal>` takes and gives back the
 * first lane's lock until it has held it n times, writing `<pid> in` and `<pid> out` to the
 * journal around each hold, then answers `churned <tries>`.
 */
import { appendFileSync } from "node:fs";
import { stat } from "node:fs/promises";
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
  } else if (line.startsWith("churn ")) {
    const [, n, journal] = line.split(" ");
    let tries = 0;
    for (let holds = 0; holds < Number(n); tries++) {
      const lock = await acquireDataDirLock(lanes[0]!).catch((error: { code?: string }) => {
        if (error.code !== "data_dir_locked") throw error;
      });
      if (!lock) continue;
      appendFileSync(journal!, `${process.pid} in\n`);
      await stat(lanes[0]!); // a moment inside, on the event loop, for another holder to show
      appendFileSync(journal!, `${process.pid} out\n`);
      await lock.release();
      holds++;
    }
    say(`churned ${tries}`);
  } else if (line === "release") {
    await Promise.all(held.map((lock) => lock.release()));
    held = [];
    say("released");
  }
}
