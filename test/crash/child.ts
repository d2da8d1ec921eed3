/**
 * A runtime in its own process, streaming a long run. Each event its subscriber receives
 * is printed as "<seq> <type>", so the parent knows what was delivered before it kills us.
 */
import { createRuntime, createScriptedAdapter } from "../../src/index.js";

const dataDir = process.argv[2];
if (!dataDir) throw new Error("usage: child.ts <dataDir>");
const rt = await createRuntime({
  dataDir,
  providers: {
    scripted: createScriptedAdapter({ chunkDelayMs: 1, script: () => [{ type: "text", text: "x".repeat(500_000), chunkSize: 16 }] }),
  },
});
rt.subscribe({ afterSeq: 0 }, (record) => process.stdout.write(`${record.seq} ${record.event.type}\n`));
const { threadId } = await rt.createThread({ providerTarget: "scripted", title: "crash" });
await rt.sendMessage({ threadId, text: "stream for a long time" });
