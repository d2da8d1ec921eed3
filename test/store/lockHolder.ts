/**
 * Another process taking the data-directory lock, driven line by line by test/store/lock.test.ts:
 * `go` tries to take it on <dataDir> and answers `held` or `locked <holderPid>` (or
 * `error <code>`); `release` lets go and answers `released`. Says `ready` first.
 */
import { createInterface } from "node:readline";
import { acquireDataDirLock, type DataDirLock } from "../../src/runtime/store/lock.js";

const [dataDir] = process.argv.slice(2);
if (!dataDir) throw new Error("usage: lockHolder.ts <dataDir>");

const say = (line: string) => process.stdout.write(line + "\n");
let held: DataDirLock | undefined;
say("ready");
for await (const line of createInterface({ input: process.stdin })) {
  if (line === "go") {
    try {
      held = await acquireDataDirLock(dataDir);
      say("held");
    } catch (error) {
      const { code, details } = error as { code?: string; details?: { holderPid?: number } };
      say(code === "data_dir_locked" ? `locked ${details?.holderPid}` : `error ${code ?? String(error)}`);
    }
  } else if (line === "release") {
    await held?.release();
    held = undefined;
    say("released");
  }
}
