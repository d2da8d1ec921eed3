import { startModelSimulator } from "tiller-runtime/simulator";

// A stand-in for a model API on 127.0.0.1: agent binaries (or any client) get scripted replies.
const sim = await startModelSimulator();
try {
  sim.push({ text: "Hello from the simulator." });

  // The Anthropic Messages dialect, as Claude Code speaks it (the OpenAI Responses one is at /v1/responses).
  const response = await fetch(`${sim.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": "any" },
    body: JSON.stringify({ model: "any", max_tokens: 64, messages: [{ role: "user", content: "Hi" }] }),
  });
  const message = (await response.json()) as { content: Array<{ type: string; text?: string }> };
  console.log("reply:", message.content.map((block) => block.text ?? "").join(""));
  // What it received, credentials masked.
  console.log("requests:", sim.requests.length, "| x-api-key:", sim.requests[0]?.headers["x-api-key"]);
} finally {
  await sim.close();
}
