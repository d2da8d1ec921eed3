import { fileURLToPath, pathToFileURL } from "node:url";
import type { InspectionEvent } from "xstate";
import * as predicates from "../capabilities/predicates.js";
import { InvalidInputError } from "../domain/errors.js";
import { hostSupervisorMachine } from "../machines/hostSupervisor.js";
import { DEGRADATIONS } from "../machines/policies.js";
import { providerThreadMachine } from "../machines/providerThread.js";
import { requestMachine } from "../machines/request.js";
import { runMachine } from "../machines/run.js";
import { sessionMachine } from "../machines/session.js";
import { threadMachine } from "../machines/thread.js";
import type { InspectOptions } from "./options.js";

/**
 * The runtime's and the CLI's way into the inspector (top-level `inspector/`, compiled on its
 * own to dist/inspector/). It is loaded only when asked for, and typed here by the little
 * the runtime uses of it, since src/ compiles without it.
 */

/** What the runtime needs of a live inspector (inspector/server/index.ts, `LiveInspector`). */
export interface RuntimeInspector {
  readonly server: { readonly url: string; readonly port: number };
  readonly inspect: (event: InspectionEvent) => void;
  attach(runtime: unknown, targets: string[]): void;
  close(): Promise<void>;
}
interface InspectorModule {
  buildCatalog(input: { machines: Record<string, unknown>; predicates: Record<string, unknown>; degradations: unknown }): unknown;
  startLiveInspector(options: { port?: number; token?: string; showText?: boolean; catalog: unknown }): Promise<RuntimeInspector>;
  startReplayInspector(options: { port?: number; token?: string; showText?: boolean; dataDir: string; catalog: unknown }): Promise<{ url: string; port: number; close(): Promise<void> }>;
}

/** Source tree (tsx, vitest): inspector/server/index.ts; compiled: dist/inspector/server/index.js. */
export async function loadInspector(): Promise<InspectorModule> {
  const fromSource = fileURLToPath(import.meta.url).endsWith(".ts");
  const entry = new URL(fromSource ? "../../inspector/server/index.ts" : "../inspector/server/index.js", import.meta.url);
  return (await import(pathToFileURL(fileURLToPath(entry)).href)) as InspectorModule;
}

/** The machines the page draws, the predicates their guards read, the degradations they record. */
export function inspectorCatalog(inspector: InspectorModule): unknown {
  return inspector.buildCatalog({
    machines: {
      thread: threadMachine,
      run: runMachine,
      request: requestMachine,
      session: sessionMachine,
      providerThread: providerThreadMachine,
      hostSupervisor: hostSupervisorMachine,
    },
    predicates,
    degradations: DEGRADATIONS,
  });
}

/** The inspector server's own rule (inspector/server/server.ts), checked here first for a typed error. */
const INSPECT_TOKEN = /^[A-Za-z0-9._~-]{16,}$/;

/** The runtime's `inspect` option, normalized; null when it is absent, false or a plain function. */
export function inspectOptionsOf(option: unknown): InspectOptions | null {
  if (option === undefined || option === false || typeof option === "function") return null;
  if (option === true) return {};
  if (typeof option === "number") {
    if (!Number.isInteger(option) || option < 0 || option > 65_535) throw new InvalidInputError("inspect", "a port is an integer from 0 to 65535");
    return { port: option };
  }
  if (typeof option === "object" && option !== null) {
    const { token } = option as InspectOptions;
    // An empty or short token would let anyone on this machine answer the runtime's approvals.
    if (token !== undefined && (typeof token !== "string" || !INSPECT_TOKEN.test(token))) {
      throw new InvalidInputError("inspect.token", "at least 16 characters from A-Z a-z 0-9 . _ ~ - (it is the first segment of the inspector's path)");
    }
    return option as InspectOptions;
  }
  throw new InvalidInputError("inspect", "expected true, a port, { port, showText, token } or a function");
}

export async function startRuntimeInspector(options: InspectOptions): Promise<RuntimeInspector> {
  const inspector = await loadInspector();
  const live = await inspector.startLiveInspector({
    ...(options.port !== undefined ? { port: options.port } : {}),
    ...(options.token !== undefined ? { token: options.token } : {}),
    showText: options.showText ?? false,
    catalog: inspectorCatalog(inspector),
  });
  (options.onListening ?? ((url: string) => void process.stderr.write(`tiller inspector: ${url}\n`)))(live.server.url);
  return live;
}
