import { createRuntime, createScriptedAdapter, keyedScript } from "tiller-runtime";

// A provider target: here the scripted provider, whose turns follow a script.
const scripted = createScriptedAdapter({
  script: keyedScript({
    "[deploy]": [
      { type: "text", text: "I will run the deploy script." },
      { type: "command", command: "./deploy.sh", output: "deployed", approval: true },
      { type: "text", text: "Done." },
    ],
  }),
});

const runtime = await createRuntime({ dataDir: ".tiller/example", providers: { scripted } });
try {
  // Every durable event, in order, with its sequence number.
  runtime.subscribe({ afterSeq: 0 }, ({ seq, event }) => {
    if (event.type === "run.terminal") console.log(`#${seq} run ${event.runId} ${event.status}`);
  });

  const { threadId } = await runtime.createThread({ providerTarget: "scripted", title: "Example" });
  const { runId } = await runtime.sendMessage({ threadId, text: "[deploy] ship it", commandId: "send-1" });

  // Approvals arrive as runtime requests; answer them by app id.
  const stop = runtime.subscribe({ threadId, afterSeq: 0 }, ({ event }) => {
    if (event.type === "request.opened") {
      void runtime.respond({ requestId: event.requestId, response: { kind: "decision", decision: "accept" } });
    }
  });
  const run = await runtime.waitForRun(runId);
  stop();

  const snapshot = await runtime.readThread(threadId);
  for (const item of snapshot.runs[0]!.items) console.log(item.kind, item.text ?? item.output ?? "");
  console.log("status:", run.status, "| capabilities version:", runtime.capabilities("scripted").version);
} finally {
  await runtime.close();
}
