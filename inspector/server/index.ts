import { createInspectorFeed, type InspectorFeed } from "./feed.js";
import { readRecordedLog } from "./replay.js";
import { startInspectorServer, type InspectorServer, type InspectorServerOptions } from "./server.js";
import type { Catalog, InspectedRuntime } from "./protocol.js";

export { buildCatalog, capabilityReads, machineGraph, type MachineLike } from "./graph.js";
export { createInspectorFeed, type InspectorFeed, type InspectorFeedOptions } from "./feed.js";
export {
  checkInspectorToken,
  startInspectorServer,
  type InspectorServer,
  type InspectorServerOptions,
} from "./server.js";
export { readRecordedLog } from "./replay.js";
export { redactValue, maskCredentials } from "./redact.js";
export type * from "./protocol.js";

export interface LiveInspector {
  readonly server: InspectorServer;
  readonly feed: InspectorFeed;
  /** For the runtime's `inspect` option. */
  readonly inspect: InspectorFeed["inspect"];
  attach(runtime: InspectedRuntime, targets: string[]): void;
  close(): Promise<void>;
}

/**
 * A server with a runtime's feed pointed at it: what `createRuntime({ inspect: true })` and
 * `tiller inspect` start. The feed goes through the server's WebSocket like any other runtime's
 * would, so the page sees the same thing however the runtime was started.
 */
export async function startLiveInspector(
  options: Omit<InspectorServerOptions, "replay"> & { catalog: Catalog },
): Promise<LiveInspector> {
  const { catalog, ...serverOptions } = options;
  const server = await startInspectorServer(serverOptions);
  const feed = createInspectorFeed({ url: server.feedUrl });
  return {
    server,
    feed,
    inspect: feed.inspect,
    attach: (runtime, targets) => feed.attach(runtime, catalog, targets),
    async close() {
      feed.close();
      await server.close();
    },
  };
}

/** A server over a recorded data directory: time travel through its log, no provider runs. */
export async function startReplayInspector(
  options: Omit<InspectorServerOptions, "replay"> & { dataDir: string; catalog: Catalog },
): Promise<InspectorServer> {
  const { dataDir, catalog, ...serverOptions } = options;
  const log = await readRecordedLog(dataDir);
  return startInspectorServer({ ...serverOptions, replay: { catalog, log } });
}
