import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { startModelSimulator, type ModelSimulator, type Reply } from "../src/simulator/index.js";

/**
 * The model simulator on a thread of its own, for the start-up benches. A real model API is another machine: in the
 * bench process, the simulator's replies would wait behind whatever that process's event loop does (through Tiller,
 * the runtime's work on the very frames the provider sends while it asks the model), which no real provider sees.
 * `push` is synchronous, as the in-process simulator's is: it returns once the worker has queued the replies, so a
 * reply pushed before a turn is there when the provider asks for it. Only what the benches use is here.
 */

type Message = { type: "push"; replies: Reply[] } | { type: "close" };

interface WorkerInit {
  tillerSimulator: true;
  /** One counter: replies batches queued so far. */
  acks: SharedArrayBuffer;
}

if (!isMainThread && (workerData as WorkerInit | undefined)?.tillerSimulator) {
  const init = workerData as WorkerInit;
  const acks = new Int32Array(init.acks);
  const sim = await startModelSimulator();
  parentPort!.on("message", (message: Message) => {
    if (message.type === "push") {
      sim.push(...message.replies);
      Atomics.add(acks, 0, 1);
      Atomics.notify(acks, 0);
    } else {
      void sim.close().then(() => parentPort!.postMessage({ type: "closed" }));
    }
  });
  parentPort!.postMessage({ type: "ready", url: sim.url, port: sim.port });
}

const unsupported = (what: string) => () => {
  throw new Error(`the worker simulator does not offer ${what}`);
};

export async function startSimulatorInWorker(): Promise<ModelSimulator> {
  const acks = new Int32Array(new SharedArrayBuffer(4));
  // This file is TypeScript: the worker registers tsx's loader, then loads it.
  const entry =
    `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))})` +
    `.then(({ register }) => { register(); return import(${JSON.stringify(import.meta.url)}); });`;
  const worker = new Worker(entry, {
    eval: true,
    workerData: { tillerSimulator: true, acks: acks.buffer } satisfies WorkerInit,
  });
  const next = (type: string) =>
    new Promise<{ url: string; port: number }>((resolve, reject) => {
      const onMessage = (message: { type: string; url: string; port: number }) => {
        if (message.type !== type) return;
        worker.off("message", onMessage);
        worker.off("error", reject);
        resolve(message);
      };
      worker.on("message", onMessage);
      worker.once("error", reject);
    });
  const { url, port } = await next("ready");
  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    push(...replies: Reply[]) {
      const before = Atomics.load(acks, 0);
      worker.postMessage({ type: "push", replies } satisfies Message);
      while (Atomics.load(acks, 0) === before) Atomics.wait(acks, 0, before);
    },
    requests: [],
    waitForRequests: unsupported("waitForRequests"),
    waitForAbort: unsupported("waitForAbort"),
    releaseHang: unsupported("releaseHang"),
    pending: unsupported("pending"),
    close: () =>
      (closing ??= (async () => {
        const closed = next("closed");
        worker.postMessage({ type: "close" } satisfies Message);
        await closed;
        await worker.terminate();
      })()),
  };
}
