import type { InspectionEvent } from "xstate";
import { z } from "zod";
import type { DynamicToolDefinition, ProviderAdapter, SandboxPolicy } from "../adapters/contract.js";
import { assertServed } from "../adapters/kit/defineAdapter.js";
import { parseCapabilities } from "../capabilities/schema.js";
import { parseInput, unreadable } from "../domain/commands.js";
import { InvalidInputError, isFileSystemError, isTillerError, type TillerError } from "../domain/errors.js";
import type { IdSource } from "../domain/ids.js";
import { preparePrivateDir } from "./store/files.js";

export interface RuntimeOptions {
  /** Where the runtime keeps its log and state. Default: `.tiller` in the working directory. */
  dataDir?: string;
  /** Provider targets by id. */
  providers: Record<string, ProviderAdapter>;
  /** Id source (a boundary: inject a deterministic one in tests). */
  ids?: IdSource;
  /** Clock (a boundary). */
  now?: () => Date;
  /** Allow an interrupt to stop a provider session when the provider cannot interrupt (destructive). */
  allowSessionStopInterrupt?: boolean;
  /** Group-commit window of the event log, in ms. */
  groupCommitMs?: number;
  /**
   * The live inspector. `true`, a port, or `{ port, showText, token, onListening }` starts its
   * server on 127.0.0.1 (a free port by default) with a random token in its URL, which goes to
   * `onListening` (default: printed on stderr) and `runtime.inspectorUrl`. A function receives
   * the XState inspection events of every actor instead.
   */
  inspect?: ((event: InspectionEvent) => void) | boolean | number | InspectOptions;
  /**
   * Capture git checkpoints of each thread's working directory (a baseline before each run,
   * a checkpoint after it) in a private repository under the data directory; needed for
   * `rollback` to restore files. Default false.
   */
  checkpoints?: boolean;
  /**
   * The sandbox policy sessions start under. Providers without structured approvals run
   * under it without asking (recorded as the `approvals_by_sandbox` policy). Default
   * `workspace-write`.
   */
  sandbox?: SandboxPolicy;
  /**
   * Stop a provider session after this long without a turn, giving back its host lease (default 10 min; null: never).
   */
  sessionIdleMs?: number | null;
  /**
   * Told what no caller's promise can carry: the event log could no longer be written
   * (`store_failed`: every waiter was rejected with the same typed error and the runtime
   * accepts nothing more; close it, free the space, reopen), a `subscribe` or `select` listener threw
   * (`subscriber_threw`; delivery goes on), a host the `prewarm` option started could not start
   * (`prewarm_failed`; a session starts one again), a projection snapshot could not be written (`snapshot_failed`;
   * nothing is lost, the next open replays more of the log), or an asynchronous completion failed with no caller
   * left to tell (`internal_error`, a bug). Default: `process.emitWarning`.
   */
  onFailure?: (failure: RuntimeFailure) => void;
  /**
   * The turn watchdog: a running turn that sends nothing for this long is checked: the adapter
   * is asked whether the turn is still alive (`isTurnAlive`), and when it cannot show it, the
   * run fails as `turn_silent` instead of staying "running" forever. A run waiting on an
   * approval is never checked. Default 15 minutes; `null`: never.
   */
  turnSilenceMs?: number | null;
  /**
   * Tools the embedder registers: offered to every session whose provider calls tools back
   * (`tools.supportsDynamicToolCallbacks`; elsewhere the session records `dynamic_tools_unsupported`). A call
   * arrives as a `dynamic_tool` request that the runtime answers itself with the handler's result (a
   * `tool_result`; a handler that throws, or an unknown tool, answers a failure); no user answers it.
   */
  tools?: DynamicTool[];
  /**
   * Start these targets' host processes right after open, in the background, so the first session finds its host
   * running instead of starting it (`true`: every target whose adapter has one, i.e. has `prewarm`). Open neither
   * waits for them nor fails with them: a host that cannot start is reported to `onFailure` (`prewarm_failed`) and
   * started again when a session needs it. Unused, a prewarmed host stops after the registry's idle TTL; `close`
   * stops it. Default: none.
   */
  prewarm?: boolean | string[];
}

/** A tool the embedder registers (see `RuntimeOptions.tools`). */
export interface DynamicTool extends DynamicToolDefinition {
  /**
   * Runs the tool on the provider's input (unchecked against `inputSchema`: the model wrote it). Its result goes back
   * as text: a string as it is, anything else as its JSON. What it throws goes back as a failed call.
   */
  handler(input: unknown, context: DynamicToolContext): Promise<unknown> | unknown;
}

/** Where a dynamic tool call comes from. */
export interface DynamicToolContext {
  threadId: string;
  runId: string;
  requestId: string;
}

export type RuntimeFailure =
  | { kind: "store_failed"; error: TillerError }
  | { kind: "subscriber_threw"; error: unknown }
  | { kind: "internal_error"; error: unknown }
  | { kind: "prewarm_failed"; target: string; error: unknown }
  /** A projection snapshot could not be written (a full disk...): nothing is lost, the next open replays more. */
  | { kind: "snapshot_failed"; error: unknown };

export interface InspectOptions {
  /** 0 or absent: a free port. */
  port?: number;
  /** Let the page see prompts, message text and command output (credentials stay masked). Default false. */
  showText?: boolean;
  /**
   * A fixed token (default: random), so a page or feed can reconnect to a restarted inspector: at least 16 of A-Z a-z
   * 0-9 . _ ~ - (it is a path segment of the URL).
   */
  token?: string;
  /** Receives the page's URL, token included (default: printed on stderr). */
  onListening?: (url: string) => void;
}

const fn = (what: string) =>
  z.custom<(...args: never[]) => unknown>((v) => typeof v === "function", `expected ${what}`);
const ADAPTER_METHODS = [
  "getCapabilities",
  "startSession",
  "ensureProviderThread",
  "sendRun",
  "interrupt",
  "respondToRequest",
  "streamEvents",
  "stopSession",
  "close",
] as const;

const InspectOptionsSchema = z.strictObject({
  port: z.number().int().min(0).max(65_535).optional(),
  showText: z.boolean().optional(),
  token: z.string().optional(), // its rule is the inspector's own (checked when it starts)
  onListening: fn("a function").optional(),
});

/** Tool names as model APIs take them (function names). */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

const DynamicToolSchema = z.strictObject({
  name: z.string().regex(TOOL_NAME, "tool names are 1 to 64 letters, digits, _ or -"),
  description: z.string().min(1, "describe the tool: the model reads it"),
  inputSchema: z.record(z.string(), z.unknown()).refine(isJson, "must be a JSON schema object"),
  handler: fn("a handler function"),
});

function isJson(value: unknown): boolean {
  try {
    return JSON.stringify(value) !== undefined;
  } catch {
    return false;
  }
}

/**
 * Every option, checked like any other input: a typo fails closed with `invalid_input`
 * naming the field (`sandbox: "readonly"` must never mean "no sandbox").
 */
const RuntimeOptionsSchema = z.strictObject({
  dataDir: z.string().min(1, "expected a non-empty path").optional(),
  providers: z
    .record(
      z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "target ids are letters, digits, . _ -"),
      z.custom<ProviderAdapter>((v) => typeof v === "object" && v !== null, "expected a provider adapter"),
    )
    .refine((providers) => Object.keys(providers).length > 0, "configure at least one provider target"),
  ids: z
    .custom<IdSource>(
      (v) => typeof (v as IdSource | null)?.next === "function",
      "expected an id source ({ next(prefix) })",
    )
    .optional(),
  now: fn("a clock function returning a Date").optional(),
  allowSessionStopInterrupt: z.boolean().optional(),
  groupCommitMs: z.number().finite().min(0).max(1_000).optional(),
  inspect: z
    .union([fn("a function"), z.boolean(), z.number().int().min(0).max(65_535), InspectOptionsSchema])
    .optional(),
  checkpoints: z.boolean().optional(),
  sandbox: z.enum(["read-only", "workspace-write", "full-access"]).optional(),
  sessionIdleMs: z.number().int().positive().max(2_147_483_647).nullable().optional(),
  onFailure: fn("a function").optional(),
  turnSilenceMs: z.number().int().positive().max(2_147_483_647).nullable().optional(),
  tools: z
    .array(DynamicToolSchema)
    .refine((tools) => new Set(tools.map((t) => t.name)).size === tools.length, "tool names must be unique")
    .optional(),
  prewarm: z.union([z.boolean(), z.array(z.string())]).optional(),
});

/** Where failures go when the embedder gave no `onFailure`: a process warning, never silence. */
export function failureReporter(onFailure: RuntimeOptions["onFailure"]): (failure: RuntimeFailure) => void {
  return (failure) => {
    try {
      if (onFailure) return onFailure(failure);
      process.emitWarning(failure.error instanceof Error ? failure.error : String(failure.error), {
        code: `TILLER_${failure.kind.toUpperCase()}`,
      });
    } catch {
      // a failing reporter has nowhere left to report to
    }
  };
}

function checkServed(id: string, adapter: ProviderAdapter): void {
  assertServed(adapter, parseCapabilities(adapter.getCapabilities()), `providers.${id}.capabilities`);
}

/**
 * At open, after `bindHosts`: each record only a handshake tells is negotiated (`negotiate`), then checked as every
 * other is at validation. A provider whose handshake fails fails open, typed.
 */
export async function negotiateRecords(providers: Record<string, ProviderAdapter>): Promise<void> {
  const negotiating = Object.entries(providers).filter(([, adapter]) => typeof adapter.negotiate === "function");
  await Promise.all(negotiating.map(([, adapter]) => adapter.negotiate!()));
  for (const [id, adapter] of negotiating) checkServed(id, adapter);
}

/** Validates `createRuntime`'s options (shape and adapters); the data directory is checked when it is opened. */
export function validateOptions(options: unknown): asserts options is RuntimeOptions {
  if (typeof options !== "object" || options === null) throw new InvalidInputError("options", "expected an object");
  const parsed = parseInput(RuntimeOptionsSchema, options);
  for (const [id, adapter] of Object.entries(parsed.providers)) {
    try {
      for (const method of ADAPTER_METHODS) {
        if (typeof adapter[method] !== "function")
          throw new InvalidInputError(`providers.${id}.${method}`, "adapter method missing");
      }
      // A capability declared without the method that serves it: refused before anything relies on it (a record a
      // handshake tells, once it is negotiated at open: `checkNegotiated`).
      if (typeof adapter.negotiate !== "function") checkServed(id, adapter);
    } catch (error) {
      // An adapter that throws as it is read (a Proxy, a getter, its getCapabilities) is one the runtime cannot use.
      if (isTillerError(error)) throw error;
      throw new InvalidInputError(`providers.${id}`, `cannot be read: ${unreadable(error)}`);
    }
  }
  if (Array.isArray(parsed.prewarm)) {
    for (const [i, target] of parsed.prewarm.entries()) {
      if (!Object.hasOwn(parsed.providers, target))
        throw new InvalidInputError(`prewarm.${i}`, `unknown provider target ${JSON.stringify(target)}`);
      if (typeof parsed.providers[target]!.prewarm !== "function")
        throw new InvalidInputError(`prewarm.${i}`, `the adapter of ${target} runs no host to prewarm`);
    }
  }
}

/**
 * The runtime's clock: the embedder's `now` (a boundary), each reading checked, since every record's time is written
 * from it; a reading that is not a valid Date is `invalid_input` naming `now`, where it was read.
 */
export function checkedClock(now: RuntimeOptions["now"]): () => Date {
  if (!now) return () => new Date();
  return () => {
    const time: unknown = now();
    if (!(time instanceof Date) || Number.isNaN(time.getTime()))
      throw new InvalidInputError("now", `returned ${time instanceof Date ? "an invalid Date" : typeof time}`, {
        expected: "a valid Date",
      });
    return time;
  };
}

/**
 * The data directory made (or found) and made private before anything is opened in it. A directory the runtime cannot
 * make its own (`/proc/self`: it exists, but its mode cannot be set) is `invalid_input` naming `dataDir`, as one that
 * cannot be created is: the path is the embedder's choice, and no other will do.
 */
export async function prepareDataDir(dataDir: string): Promise<void> {
  await preparePrivateDir(dataDir, "dataDir").catch((error: unknown) => {
    if (!isFileSystemError(error)) throw error;
    throw new InvalidInputError("dataDir", `cannot be made private (${error.code}): ${dataDir}`, { errno: error.code });
  });
}

/** The targets `prewarm` names (validated): `true` is every target whose adapter can prewarm. */
export function prewarmTargets(options: RuntimeOptions): string[] {
  const { prewarm, providers } = options;
  if (Array.isArray(prewarm)) return [...new Set(prewarm)];
  if (prewarm !== true) return [];
  return Object.keys(providers).filter((target) => typeof providers[target]!.prewarm === "function");
}
