import { fileURLToPath, pathToFileURL } from "node:url";
import type { InspectionEvent } from "xstate";
import * as predicates from "../capabilities/predicates.js";
import { InspectorUnavailableError, InvalidInputError } from "../domain/errors.js";
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
  /** Throws unless a given token is long and URL-path safe enough (the server's own rule). */
  checkInspectorToken(token: string): void;
  buildCatalog(input: {
    machines: Record<string, unknown>;
    predicates: Record<string, unknown>;
    degradations: unknown;
  }): unknown;
  startLiveInspector(options: {
    port?: number;
    token?: string;
    showText?: boolean;
    catalog: unknown;
  }): Promise<RuntimeInspector>;
  startReplayInspector(options: {
    port?: number;
    token?: string;
    showText?: boolean;
    dataDir: string;
    catalog: unknown;
  }): Promise<{ url: string; port: number; close(): Promise<void> }>;
}

/** Source tree (tsx, vitest): inspector/server/index.ts; compiled: dist/inspector/server/index.js. */
export async function loadInspector(): Promise<InspectorModule> {
  const fromSource = fileURLToPath(import.meta.url).endsWith(".ts");
  const entry = new URL(
    fromSource ? "../../inspector/server/index.ts" : "../inspector/server/index.js",
    import.meta.url,
  );
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

/** A TCP port (0: a free one), or a typed error naming `field`. */
export function portOf(value: unknown, field: string): number {
  const port = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
  if (typeof port !== "number" || !Number.isInteger(port) || port < 0 || port > 65_535)
    throw new InvalidInputError(field, `must be a port number from 0 to 65535, not ${JSON.stringify(value)}`);
  return port;
}

/** The runtime's `inspect` option, normalized; null when it is absent, false or a plain function. */
export function inspectOptionsOf(option: unknown): InspectOptions | null {
  if (option === undefined || option === false || typeof option === "function") return null;
  if (option === true) return {};
  if (typeof option === "number") return { port: portOf(option, "inspect") };
  if (typeof option === "object" && option !== null) return option as InspectOptions;
  throw new InvalidInputError("inspect", "expected true, a port, { port, showText, token } or a function");
}

export async function startRuntimeInspector(options: InspectOptions): Promise<RuntimeInspector> {
  const inspector = await loadInspector();
  if (options.token !== undefined) {
    // An empty or short token would let anyone on this machine answer the runtime's approvals.
    try {
      inspector.checkInspectorToken(String(options.token));
    } catch (error) {
      throw new InvalidInputError("inspect.token", error instanceof Error ? error.message : String(error));
    }
  }
  const live = await inspector
    .startLiveInspector({
      ...(options.port !== undefined ? { port: options.port } : {}),
      ...(options.token !== undefined ? { token: options.token } : {}),
      showText: options.showText ?? false,
      catalog: inspectorCatalog(inspector),
    })
    .catch((error: unknown) => {
      // Its port taken (EADDRINUSE) or not ours (EACCES): the inspector's fault to report, not the store's.
      const errno = (error as NodeJS.ErrnoException | null)?.code;
      const where = `127.0.0.1:${options.port ?? 0}`;
      const why = errno ?? (error instanceof Error ? error.message : String(error));
      throw Object.assign(
        new InspectorUnavailableError(`the inspector cannot listen on ${where}: ${why}`, {
          port: options.port ?? 0,
          ...(errno ? { errno } : {}),
        }),
        { cause: error },
      );
    });
  (options.onListening ?? ((url: string) => void process.stderr.write(`tiller inspector: ${url}\n`)))(live.server.url);
  return live;
}
