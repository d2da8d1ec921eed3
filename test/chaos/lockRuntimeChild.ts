/**
 * A whole runtime contending for a data directory, driven line by line by
 * test/chaos/lockRuntimes.test.ts: `go` opens a runtime on <dataDir> and answers `open` or
 * `locked` (or `error <code> <message>`); `work` makes a thread there (a write to the log) and
 * answers `worked`; `close` closes it and answers `closed`. It opens and closes one runtime on a
 * private directory first (loading everything), then says `ready`.
 */
import { createInterface } from "node:readline";
import { createRuntime, createScriptedAdapter, type TillerRuntime } from "../../src/index.js";

const [dataDir, warmDir] = process.argv.slice(2);
if (!dataDir || !warmDir) throw new Error("usage: lockRuntimeChild.ts <dataDir> <warmDir>");

const open = () => createRuntime({ dataDir, providers: { s: createScriptedAdapter() } });
await (await createRuntime({ dataDir: warmDir, providers: { s: createScriptedAdapter() } })).close();
const say = (line: string) => process.stdout.write(line + "\n");
let rt: TillerRuntime | undefined;
say("ready");
for await (const line of createInterface({ input: process.stdin })) {
  try {
    if (line === "go") {
      rt = await open();
      say("open");
    } else if (line === "work") {
      await rt!.createThread({ providerTarget: "s", title: `by ${process.pid}` });
      say("worked");
    } else if (line === "close") {
      await rt?.close();
      rt = undefined;
      say("closed");
    }
  } catch (error) {
    const { code, message } = error as { code?: string; message?: string };
    say(code === "data_dir_locked" ? "locked" : `error ${code ?? "-"} ${message ?? String(error)}`);
  }
}
