import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createScriptedAdapter,
  createScriptedHostAdapter,
  defineCapabilities,
  sequentialIds,
  ScriptedBackend,
  type CapabilityOverrides,
  type DomainEvent,
  type LogRecord,
  type ProviderCapabilities,
  type RuntimeOptions,
  type ScriptedHostAdapter,
  type ScriptStep,
} from "../../src/index.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { openRuntime } from "../support/internals.js";

/**
 * The system under test for one model path: a real runtime on a fresh data directory and
 * a fresh git work tree, with scripted providers configured with one capability combination.
 * Turns are driven by prompts of the form `<kind>:<n>`; each holds at gate `finish-<n>`
 * until the path's FINISH step opens it.
 */

export type Flags = Record<string, boolean | string | number | null>;

/** Nested overrides from dotted flag paths, per target: `{ main: { turns: { supportsInterrupt: false } } }`. */
export function overridesFrom(flags: Flags, target: string): CapabilityOverrides {
  const out: Record<string, Record<string, unknown>> = {};
  for (const [key, value] of Object.entries(flags)) {
    const [t, group, field] = key.split(".");
    if (t !== target || !group || !field) continue;
    (out[group] ??= {})[field] = value;
  }
  return out as CapabilityOverrides;
}

export function capsOf(flags: Flags, target = "main"): ProviderCapabilities {
  return defineCapabilities(overridesFrom(flags, target));
}

/** The adapter, announcing `declared` as its record (at construction and every session start) whatever it does. */
function declaring(adapter: ProviderAdapter, declared: ProviderCapabilities | null): ProviderAdapter {
  if (!declared) return adapter;
  const startSession = adapter.startSession.bind(adapter);
  return Object.assign(Object.create(adapter) as ProviderAdapter, {
    getCapabilities: () => declared,
    startSession: async (input: Parameters<ProviderAdapter["startSession"]>[0]) => ({
      ...(await startSession(input)),
      capabilities: declared,
    }),
  });
}

/** The adapter, naming every turn `turn-1` (a provider whose turn ids repeat). */
function namingEveryTurnAlike(adapter: ProviderAdapter): ProviderAdapter {
  const sendRun = adapter.sendRun.bind(adapter);
  const events = adapter.streamEvents.bind(adapter);
  return Object.assign(Object.create(adapter) as ProviderAdapter, {
    sendRun: async (input: Parameters<ProviderAdapter["sendRun"]>[0]) => {
      await sendRun(input);
      return { turnRef: "turn-1" };
    },
    streamEvents: () => ({
      async *[Symbol.asyncIterator]() {
        for await (const frame of events()) {
          const { event } = frame;
          yield "turnRef" in event && event.turnRef ? { ...frame, event: { ...event, turnRef: "turn-1" } } : frame;
        }
      },
    }),
  });
}

/** The adapter, sending every item's start twice (a provider that repeats itself). */
function startingEveryItemTwice(adapter: ProviderAdapter): ProviderAdapter {
  const events = adapter.streamEvents.bind(adapter);
  return Object.assign(Object.create(adapter) as ProviderAdapter, {
    streamEvents: () => ({
      async *[Symbol.asyncIterator]() {
        for await (const frame of events()) {
          yield frame;
          if (frame.event.type === "item.started") yield frame;
        }
      },
    }),
  });
}

const NOT_CALLS = new Set<PropertyKey>(["getCapabilities", "streamEvents", "bindHosts", "close"]);

/** What the runtime asked of the providers: calls not answered yet, and every call made, by method. */
export interface Calls {
  inFlight: number;
  made: Map<string, number>;
  /** The last input of each method. */
  lastInput: Map<string, unknown>;
}

/** The adapter, counting the runtime's calls (the provider boundary, observed). */
function counted(adapter: ProviderAdapter, calls: Calls): ProviderAdapter {
  return new Proxy(adapter, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== "function" || NOT_CALLS.has(property))
        return typeof value === "function" ? value.bind(target) : value;
      return async (...args: unknown[]) => {
        calls.inFlight += 1;
        calls.made.set(String(property), (calls.made.get(String(property)) ?? 0) + 1);
        calls.lastInput.set(String(property), args[0]);
        try {
          return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        } finally {
          calls.inFlight -= 1;
        }
      };
    },
  });
}

/** What each prompt kind makes the scripted provider do. */
function stepsFor(text: string): ScriptStep[] {
  const [kind = "plain", n = "0"] = text.split(":");
  const finish: ScriptStep = { type: "gate", name: `finish-${n}` };
  switch (kind) {
    case "approval":
      return [
        { type: "text", text: `asking ${n}` },
        { type: "command", command: `echo ${n}`, output: `${n}\n`, approval: true },
        finish,
        { type: "text", text: ` done ${n}` },
      ];
    case "artifacts":
      return [
        {
          type: "plan",
          steps: [
            { step: "look", status: "completed" },
            { step: "edit", status: "in_progress" },
          ],
        },
        { type: "todo", items: [{ text: "edit", status: "in_progress" }] },
        { type: "text", text: `planned ${n}` },
        finish,
      ];
    case "subagent":
      return [
        {
          type: "subagent",
          agent: "helper",
          prompt: "write",
          steps: [{ type: "file_change", path: `sub-${n}.txt`, diff: "+sub", content: `sub ${n}\n` }],
        },
        { type: "text", text: `delegated ${n}` },
        finish,
      ];
    case "steer":
      return [{ type: "text", text: `steered ${n}` }, finish];
    case "asks":
      // A command that asks at the root, then one that asks from inside a subagent.
      return [
        { type: "command", command: `make ${n}`, output: `${n}\n`, approval: true },
        {
          type: "subagent",
          agent: "helper",
          prompt: `check ${n}`,
          steps: [{ type: "command", command: `check ${n}`, output: "ok\n", approval: true }],
        },
        finish,
        { type: "text", text: `asked ${n}` },
      ];
    case "delegate":
      // A subagent that says something, then waits at gate `sub-<n>`; its parent then replies.
      return [
        {
          type: "subagent",
          agent: "helper",
          prompt: `look at ${n}`,
          steps: [
            { type: "text", text: `child ${n}` },
            { type: "gate", name: `sub-${n}` },
          ],
        },
        { type: "text", text: `parent ${n}` },
        finish,
      ];
    case "callback":
      // The embedder's tool `lookup`, called back, then a reply.
      return [
        { type: "tool_call", tool: "lookup", input: { order: n } },
        finish,
        { type: "text", text: `looked up ${n}` },
      ];
    case "mcp":
      // A tool from an MCP server.
      return [
        { type: "tool", name: "search", input: { q: n }, output: `hits ${n}`, mcp: { server: "docs", tool: "search" } },
        finish,
        { type: "text", text: `searched ${n}` },
      ];
    case "plans":
      // A plan to propose, then a question before going on.
      return [
        { type: "proposed_plan", text: `plan ${n}: build, then test` },
        { type: "question", questions: [{ id: "go", question: `go on with ${n}?` }] },
        finish,
        { type: "text", text: `went on ${n}` },
      ];
    case "tools":
      // Everything after the gate: what the turn's items record, they record when FINISH opens it.
      return [
        finish,
        { type: "reasoning", text: `thinking about ${n}` },
        { type: "command", command: `make ${n}`, output: `built ${n}\n` },
        { type: "text", text: `made ${n}` },
      ];
    default:
      return [
        { type: "file_change", path: `file-${n}.txt`, diff: `+${n}`, content: `run ${n}\n` },
        { type: "text", text: `working ${n}` },
        finish,
        { type: "text", text: ` done ${n}` },
      ];
  }
}

/**
 * The model's prompts as the scripted host's prompt markers (prompts `<kind>:<n>`, n below 10): a host process
 * runs the same turns as the in-process provider.
 */
function hostScripts(): Record<string, ScriptStep[]> {
  const kinds = ["approval", "plain"];
  return Object.fromEntries(
    kinds.flatMap((k) => [1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => [`${k}:${n}`, stepsFor(`${k}:${n}`)])),
  );
}

export class World {
  readonly backends = new Map<string, ScriptedBackend>();
  /** Providers in host processes: their gates open through the host. */
  readonly hosts: ScriptedHostAdapter[] = [];
  readonly records: LogRecord<DomainEvent>[] = [];
  threadId = "";
  forkThreadId: string | null = null;
  runIds: string[] = [];
  /** Ordinal of the latest prompt sent (its gate is `finish-<n>`). */
  n = 0;
  lastError: { code: string } | null = null;
  lastReceipt: unknown = null;
  /** Prompt numbers sent into each run (its own and its steers): the gates FINISH opens. */
  #gates = new Map<string, number[]>();
  /** Provider calls the runtime has made and not yet seen answered (see `settle`). */
  readonly calls: Calls;

  private constructor(
    readonly rt: Runtime,
    readonly flags: Flags,
    readonly dataDir: string,
    readonly cwd: string,
    calls: Calls,
  ) {
    this.calls = calls;
  }

  /**
   * `declaredOnly`: the providers only declare the path's record and behave as the full one (they
   * ask, send ids and report what the record says they will not): the record is all the runtime knows.
   * `sameTurnRefs`: they name every turn `turn-1`, in sendRun's reply and every event.
   * `repeatItemStarts`: they send every item's start twice.
   */
  static async open(
    flags: Flags,
    targets: string[],
    options: Partial<RuntimeOptions> = {},
    dataDir?: string,
    {
      declaredOnly = false,
      sameTurnRefs = false,
      repeatItemStarts = false,
      hosted = false,
    }: { declaredOnly?: boolean; sameTurnRefs?: boolean; repeatItemStarts?: boolean; hosted?: boolean } = {},
  ): Promise<World> {
    const dir = dataDir ?? (await mkdtemp(join(tmpdir(), "tiller-model-")));
    const cwd = join(dir, "work");
    await mkdir(cwd, { recursive: true });
    const backends = new Map(targets.map((t) => [t, new ScriptedBackend()]));
    const calls: Calls = { inFlight: 0, made: new Map(), lastInput: new Map() };
    // `hosted`: each provider in a host process on a unix socket, which outlives the runtime.
    const hosts = hosted
      ? targets.map((t) =>
          createScriptedHostAdapter({
            transport: "socket",
            capabilities: overridesFrom(flags, t),
            scripts: hostScripts(),
          }),
        )
      : [];
    const providers = Object.fromEntries(
      targets.map((t, i) => [
        t,
        counted(
          declaring(
            [sameTurnRefs && namingEveryTurnAlike, repeatItemStarts && startingEveryItemTwice].reduce(
              (a: ProviderAdapter, wrap) => (wrap ? wrap(a) : a),
              hosts[i] ??
                createScriptedAdapter({
                  // Declaring only, the provider does all it can: it even tags MCP tools and calls tools back.
                  capabilities: declaredOnly
                    ? { tools: { supportsMcpTools: true, supportsDynamicToolCallbacks: true } }
                    : overridesFrom(flags, t),
                  backend: backends.get(t)!,
                  script: ({ text }) => stepsFor(text),
                  // `late:<n>` turns wait at gate `start-<n>` before the provider takes them up.
                  startGate: ({ text }) => (text.startsWith("late:") ? `start-${text.split(":")[1]}` : undefined),
                }),
            ),
            declaredOnly ? capsOf(flags, t) : null,
          ),
          calls,
        ),
      ]),
    );
    const rt = await openRuntime({
      dataDir: join(dir, "data"),
      providers,
      ids: sequentialIds(),
      checkpoints: flags["runtime.checkpoints"] === true,
      ...options,
    });
    const world = new World(rt, flags, dir, cwd, calls);
    for (const [t, b] of backends) world.backends.set(t, b);
    world.hosts.push(...hosts);
    rt.subscribe({ afterSeq: 0 }, (r) => world.records.push(r));
    return world;
  }

  get head(): number {
    return this.records.at(-1)?.seq ?? 0;
  }

  get runId(): string {
    return this.runIds.at(-1)!;
  }

  run(runId = this.runId) {
    return this.rt.views.runs.get(runId)!;
  }

  async createThread(target = "main"): Promise<void> {
    this.threadId = (await this.rt.createThread({ providerTarget: target, cwd: this.cwd })).threadId;
  }

  /** Sends `<kind>:<n>`; a typed refusal is kept in `lastError` for the model to check. */
  async send(
    kind: string,
    extra: {
      mode?: "auto" | "queue" | "steer";
      providerTarget?: string;
      model?: string;
      runtimeMode?: { interaction?: "default" | "plan"; approvals?: "on_request" | "never" };
      threadId?: string;
    } = {},
  ): Promise<void> {
    this.n += 1;
    this.lastError = null;
    try {
      const receipt = await this.rt.sendMessage({
        threadId: extra.threadId ?? this.threadId,
        text: `${kind}:${this.n}`,
        ...extra,
      });
      this.lastReceipt = receipt;
      if (!this.runIds.includes(receipt.runId)) this.runIds.push(receipt.runId);
      this.#gates.set(receipt.runId, [...(this.#gates.get(receipt.runId) ?? []), this.n]);
    } catch (error) {
      this.lastError = { code: (error as { code?: string }).code ?? "unknown" };
    }
  }

  /** Calls the API; a typed refusal is kept in `lastError` instead of failing the step. */
  async attempt(fn: () => Promise<unknown>): Promise<void> {
    this.lastError = null;
    try {
      this.lastReceipt = await fn();
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (!code) throw error;
      this.lastError = { code };
    }
  }

  /** Lets the thread's active run finish (its gates, steer texts included); returns its id. */
  finish(threadId = this.threadId): string {
    const run = this.rt.views.threads
      .get(threadId)!
      .runs.find((r) => ["starting", "running", "waiting"].includes(r.status));
    if (!run) throw new Error("FINISH with no active run");
    for (const n of this.#gates.get(run.runId) ?? []) this.openGate(n);
    return run.runId;
  }

  /** A run another life of the runtime started (a crashed one) waits at the gates of these prompt numbers. */
  adoptRun(runId: string, ...prompts: number[]): void {
    if (!this.runIds.includes(runId)) this.runIds.push(runId);
    this.#gates.set(runId, prompts);
  }

  openGate(n: number): void {
    for (const backend of this.backends.values()) backend.openGate(`finish-${n}`);
    for (const host of this.hosts) void host.openGate(`finish-${n}`).catch(() => undefined);
  }

  /** Waits (polling the read models) until `condition` holds; fails with `what` after 15 s. */
  async until(what: string, condition: () => boolean): Promise<void> {
    const deadline = Date.now() + 15_000;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 2));
    }
  }

  /**
   * Waits until the runtime is at rest: no provider call unanswered, and everything committed
   * delivered to `records`, with nothing new committed meanwhile (an answered call's outcome is
   * committed before the next look). What a step recorded is then all in, on any machine.
   */
  async settle(): Promise<void> {
    for (;;) {
      const head = this.rt.views.head;
      if (this.threadId) await this.rt.readThread(this.threadId);
      await this.until("the runtime to be at rest", () => this.head >= head && this.calls.inFlight === 0);
      if (this.rt.views.head === head) return;
    }
  }

  policiesSince(seq: number): string[] {
    return this.records
      .filter((r) => r.seq > seq && r.event.type === "policy.applied")
      .map((r) => (r.event as { policy: string }).policy);
  }

  async close(): Promise<void> {
    if (!this.rt.closed) {
      for (let n = 1; n <= this.n; n++) this.openGate(n);
      await this.rt.close();
    }
    await rm(this.dataDir, { recursive: true, force: true });
  }
}
