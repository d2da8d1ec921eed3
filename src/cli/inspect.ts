import { stat } from "node:fs/promises";
import { join } from "node:path";
import { createScriptedAdapter } from "../adapters/scripted/host/provider.js";
import { keyedScript, type ScriptStep } from "../adapters/scripted/host/script.js";
import { InvalidInputError } from "../domain/errors.js";
import { createRuntime, type TillerRuntime } from "../index.js";
import { inspectorCatalog, loadInspector } from "../runtime/inspector.js";

/**
 * `tiller inspect`: the live inspector on a scripted session that waits for you (an approval
 * answered from the page, a steer the provider cannot take natively, so the interrupt-restart
 * degradation fires), or `--replay DIR`: a recorded data directory, stepped through without
 * running any provider. Both serve until stopped (or until `signal` aborts).
 */
export interface InspectCommandOptions {
  port: number;
  dataDir: string;
  replay: string | null;
  showText: boolean;
  /** Approve the scripted session's request without waiting for the page. */
  yes: boolean;
  write: (text: string) => void;
  /** Stops serving (default: SIGINT / SIGTERM). */
  signal?: AbortSignal;
  /** Delay between streamed chunks of the scripted provider, so the page can be watched. */
  chunkDelayMs?: number;
  /** The scripted provider's story, keyed by prompt prefix (tests give their own). */
  story?: Record<string, ScriptStep[]>;
}

const story = {
  "[fix]": [
    { type: "reasoning", text: "The date test fails only east of UTC, so today() must use UTC." },
    { type: "text", text: "I will change today() to format the date in UTC, then run the tests.", chunkSize: 4 },
    {
      type: "file_change",
      path: "src/date.ts",
      diff: "-new Date().toDateString()\n+new Date().toISOString().slice(0, 10)",
    },
    { type: "command", command: "npm test -- date", output: "✓ date.test.ts (3 tests)", approval: true },
    { type: "text", text: "Fixed: the date tests pass in every timezone.", chunkSize: 4 },
  ],
  "[changelog]": [
    { type: "text", text: "## Changelog\n - today() formats dates in UTC\n - ", chunkSize: 3 },
    { type: "hang" },
  ],
} satisfies Record<string, ScriptStep[]>;

export async function runInspect(options: InspectCommandOptions): Promise<void> {
  const stopped = options.signal ?? untilSignal();
  if (options.replay) {
    await stat(join(options.replay, "events.jsonl")).catch(() => {
      throw new InvalidInputError("replay", `${options.replay} has no events.jsonl (not a Tiller data directory)`);
    });
    const inspector = await loadInspector();
    const server = await inspector.startReplayInspector({
      port: options.port,
      showText: options.showText,
      dataDir: options.replay,
      catalog: inspectorCatalog(inspector),
    });
    options.write(
      `Replaying ${options.replay} (read-only; no provider runs).\nOpen ${server.url}\nStop with Ctrl-C.\n`,
    );
    await aborted(stopped);
    await server.close();
    return;
  }

  const adapter = createScriptedAdapter({
    chunkDelayMs: options.chunkDelayMs ?? 80,
    // No native steering: a steer takes the interrupt-restart path, a visible degradation.
    capabilities: { turns: { supportsActiveSteering: false } },
    script: keyedScript(options.story ?? story),
  });
  let url = "";
  const rt = await createRuntime({
    dataDir: options.dataDir,
    providers: { scripted: adapter },
    inspect: { port: options.port, showText: options.showText, onListening: (u) => (url = u) },
  });
  try {
    options.write(`Inspector: ${url}\nData directory: ${rt.dataDir}\n`);
    const { threadId } = await rt.createThread({ providerTarget: "scripted", title: "Inspector tour: fix a date bug" });
    const stop = rt.subscribe({ afterSeq: rt.head }, ({ event }) => {
      if (event.type !== "request.opened") return;
      if (options.yes)
        void rt
          .respond({ requestId: event.requestId, response: { kind: "decision", decision: "accept" } })
          .catch(() => undefined);
      else options.write(`Waiting for approval of request ${event.requestId}: answer it from the page.\n`);
    });
    const first = await rt.sendMessage({ threadId, text: "[fix] the failing date test" });
    const firstRun = await Promise.race([rt.waitForRun(first.runId), aborted(stopped)]);
    stop();
    if (firstRun) {
      const from = rt.head;
      const second = await rt.sendMessage({ threadId, text: "[changelog] write a long changelog" });
      options.write(`Second run ${second.runId} started: it is steered once it streams.\n`);
      // Ctrl-C while it has not streamed yet still ends here, so the runtime closes (and gives back its lock).
      if (await untilStreaming(rt, second.runId, from, stopped)) {
        await rt.sendMessage({ threadId, text: "Keep it to one line", mode: "steer" });
        options.write(
          "Steered the second run: the provider cannot steer natively, " +
            "so it was interrupted and restarted (see the capability panel).\n",
        );
        await Promise.race([rt.waitForRun(second.runId), aborted(stopped)]);
        if (!stopped.aborted) options.write("The tour is over; the inspector stays up until Ctrl-C.\n");
      }
    }
    await aborted(stopped);
  } finally {
    await rt.close();
  }
}

function untilSignal(): AbortSignal {
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return controller.signal;
}

function aborted(signal: AbortSignal): Promise<undefined> {
  return new Promise((resolve) =>
    signal.aborted ? resolve(undefined) : signal.addEventListener("abort", () => resolve(undefined), { once: true }),
  );
}

/** True once the run streams its first delta; false if `signal` aborts first. */
function untilStreaming(rt: TillerRuntime, runId: string, afterSeq: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    let settled = false;
    let stop: (() => void) | null = null;
    const settle = (streaming: boolean) => {
      if (settled) return;
      settled = true;
      stop?.();
      signal.removeEventListener("abort", onAbort);
      resolve(streaming);
    };
    const onAbort = () => settle(false);
    if (signal.aborted) return settle(false);
    signal.addEventListener("abort", onAbort, { once: true });
    stop = rt.subscribe({ afterSeq }, (r) => {
      if (r.event.type === "node.delta" && r.event.runId === runId) settle(true);
    });
    if (settled) stop();
  });
}
