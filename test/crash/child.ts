/**
 * A runtime in its own process. Each event its subscriber receives is printed as
 * "<seq> <type>", so the parent knows what was delivered before it kills us.
 *   stream: one long streaming run
 *   queue:  a run that hangs, with a follow-up queued behind it
 *   native: the same, on a provider that queues follow-ups itself (the follow-up is handed to it)
 */
import { createRuntime, createScriptedAdapter, keyedScript } from "../../src/index.js";

const [dataDir, mode = "stream"] = process.argv.slice(2);
if (!dataDir) throw new Error("usage: child.ts <dataDir> [stream|queue|native]");
const rt = await createRuntime({
  dataDir,
  providers: {
    scripted: createScriptedAdapter({
      chunkDelayMs: 1,
      capabilities: { turns: { supportsQueuedMessages: mode === "native" } },
      script: keyedScript({
        // Words: a run with no whitespace is stored only once it ends (it could be a credential: docs/events.md).
        "[stream]": [{ type: "text", text: "xxxxxxxxxxxxxxx ".repeat(31_250), chunkSize: 16 }],
        "[hang]": [{ type: "text", text: "working" }, { type: "hang" }],
      }),
    }),
  },
});
rt.subscribe({ afterSeq: 0 }, (record) => process.stdout.write(`${record.seq} ${record.event.type}\n`));
const { threadId } = await rt.createThread({ providerTarget: "scripted", title: "crash" });
if (mode === "stream") {
  await rt.sendMessage({ threadId, text: "[stream] for a long time" });
} else {
  await rt.sendMessage({ threadId, text: "[hang] until killed" });
  await rt.sendMessage({ threadId, text: "queued behind it", mode: "queue" });
}
