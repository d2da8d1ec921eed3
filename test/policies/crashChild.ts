/**
 * A runtime in its own process whose only run waits on an approval. It prints
 * "opened <requestId>" once that request is durable, then waits to be SIGKILLed.
 */
import { createRuntime, createScriptedAdapter } from "../../src/index.js";

const [dataDir] = process.argv.slice(2);
if (!dataDir) throw new Error("usage: crashChild.ts <dataDir>");
setInterval(() => undefined, 1 << 30); // stay alive until killed
const rt = await createRuntime({
  dataDir,
  providers: {
    s: createScriptedAdapter({
      script: () => [{ type: "command", command: "rm -rf build", output: "", approval: true }, { type: "text", text: "done" }],
    }),
  },
});
rt.subscribe({ afterSeq: 0 }, (record) => {
  if (record.event.type === "request.opened") process.stdout.write(`opened ${record.event.requestId}\n`);
});
const { threadId } = await rt.createThread({ providerTarget: "s", title: "crash" });
await rt.sendMessage({ threadId, text: "needs approval" });
