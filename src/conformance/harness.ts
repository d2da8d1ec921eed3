import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ProviderAdapter, ProviderAdapterEvent, ProviderEvent } from "../adapters/contract.js";
import {
  createRuntime,
  isTillerError,
  type DomainEvent,
  type LogRecord,
  type ProviderCapabilities,
  type TillerRuntime,
} from "../index.js";
import type { TurnBehaviour, TurnEvidence, WorldRun } from "./world.js";

/**
 * One path's system under test: a real runtime on a temporary data directory (loopback only: no inspector), with two
 * targets on the world's provider (the second only where a conversation switches providers), and one thread. The
 * harness sees what a user sees (the log, receipts, typed refusals) and, tapped at the contract boundary, the provider
 * events the adapters stream.
 */

export const TARGET = "provider";
/** The embedder's tool the harness registers with each runtime (a `dynamic_tool` turn calls it), its answer. */
export const DYNAMIC_TOOL = { name: "conformance_echo", answer: "conformance echo answer" } as const;
/** A second target on the same provider: where a conversation switches to, and back from. */
export const OTHER_TARGET = "provider-b";

export type DomainRecord = LogRecord<DomainEvent>;
type EventOf<T extends DomainEvent["type"]> = Extract<DomainEvent, { type: T }>;

/** A call the runtime made on the adapter, with what it settled to (the adapter's own answer, before the runtime's). */
export interface AdapterCall {
  method: string;
  input: unknown;
  /** Whether the call has settled, and how. */
  settled: "pending" | "resolved" | "rejected";
  result?: unknown;
  /** How many provider events the adapter had streamed when the call settled. */
  eventsWhenSettled?: number;
  /** The adapter (as tapped) the call was made on: where the suite asks it again (a snapshot read). */
  via: ProviderAdapter;
}

/**
 * The adapter as the runtime gets it, its event stream copied into `seen` and its calls into `calls` (optional
 * methods stay absent).
 */
function tapped(
  adapter: ProviderAdapter,
  seen: ProviderEvent[],
  calls: AdapterCall[],
  onEvent: () => void,
): ProviderAdapter {
  const tap: ProviderAdapter = new Proxy(adapter, {
    get(target, property) {
      if (property === "streamEvents")
        return () => ({
          async *[Symbol.asyncIterator]() {
            for await (const frame of target.streamEvents() as AsyncIterable<ProviderAdapterEvent>) {
              seen.push(frame.event);
              onEvent();
              yield frame;
            }
          },
        });
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== "function") return value;
      const method = String(property);
      return (...args: unknown[]) => {
        const result = (value as (...a: unknown[]) => unknown).apply(target, args);
        if (method === "getCapabilities")
          calls.push({ method, input: undefined, settled: "resolved", result, via: tap });
        if (!(result instanceof Promise)) return result;
        const call: AdapterCall = { method, input: args[0], settled: "pending", via: tap };
        calls.push(call);
        onEvent();
        const settle = (how: "resolved" | "rejected", value: unknown) => {
          Object.assign(call, { settled: how, result: value, eventsWhenSettled: seen.length });
          onEvent();
        };
        result.then(
          (v) => settle("resolved", v),
          (e) => settle("rejected", e),
        );
        return result;
      };
    },
  });
  return tap;
}

/** The adapter, showing the runtime `record` (narrower than its own) wherever it announces one. */
function showing(adapter: ProviderAdapter, record: ProviderCapabilities): ProviderAdapter {
  const overrides: Partial<ProviderAdapter> = {
    getCapabilities: () => record,
    startSession: async (input) => ({ ...(await adapter.startSession(input)), capabilities: record }),
  };
  if (adapter.reattachSession) {
    const reattach = adapter.reattachSession.bind(adapter);
    overrides.reattachSession = async (input) => {
      const found = await reattach(input);
      return found && { ...found, capabilities: record };
    };
  }
  return new Proxy(adapter, {
    get(target, property) {
      if (property in overrides) return overrides[property as keyof ProviderAdapter];
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

export class Harness {
  readonly records: DomainRecord[] = [];
  /** Provider events the adapter streamed, in order, across runtime restarts. */
  readonly provider: ProviderEvent[] = [];
  /** The calls the runtime made on the adapters, in order, across runtime restarts. */
  readonly calls: AdapterCall[] = [];
  threadId = "";
  /** The runs of the current thread's conversation, in the order they were sent. */
  readonly runIds: string[] = [];
  forkThreadId: string | null = null;
  /** A second thread on the same target, and its run. */
  otherThreadId: string | null = null;
  otherRunId: string | null = null;
  /** The run the latest message went into, on whichever thread. */
  lastRunId: string | null = null;
  readonly target = TARGET;
  /** The latest typed refusal, with the degradation policy and capability its details name. */
  lastError: { code: string; message: string; policy: string | null; capability: string | null } | null = null;
  lastReceipt: unknown = null;
  /** The user texts sent, by run. */
  readonly userTexts = new Map<string, string>();
  /** Gates of the `hold` turns sent (released together). */
  readonly gates: string[] = [];
  /** The text of the latest steer sent. */
  steerText = "";
  /** The user text of the fork's first run (what its parent must not see). */
  forkText: string | null = null;
  forkRunId: string | null = null;
  /** What the provider answered when asked for the thread's snapshot (or why it could not). */
  snapshot: { value: unknown } | { failed: string } | null = null;
  /** The receipt of the latest rollback. */
  rollbackReceipt: { provider?: string } | null = null;
  /** A subagent wait settled before the subagent could have ended (its gate still closed). */
  waitSettledEarly = false;
  #n = 0;
  /** The thread of each run sent, in the order sent; the provider's evidence of each that ended. */
  #runThreads = new Map<string, string>();
  #turns = new Map<string, TurnEvidence>();
  #waiters = new Set<() => void>();
  #unsubscribe: (() => void) | null = null;

  private constructor(
    readonly world: WorldRun,
    readonly dir: string,
    readonly cwd: string,
    public rt: TillerRuntime,
    readonly timeoutMs: number,
  ) {}

  /** The record the runtime is shown instead of the declared one (a narrowed path), or null. */
  narrowed: ProviderCapabilities | null = null;

  /** Whether the runtime checkpoints the working directory (git): only where the path rolls back. */
  checkpoints = false;

  static async open(
    world: WorldRun,
    timeoutMs: number,
    options: { narrowed?: ProviderCapabilities | undefined; checkpoints?: boolean } = {},
  ): Promise<Harness> {
    const { narrowed } = options;
    const dir = await mkdtemp(join(tmpdir(), "tiller-conformance-"));
    const cwd = join(dir, "work");
    await mkdir(cwd, { recursive: true });
    const h = new Harness(world, dir, cwd, null as unknown as TillerRuntime, timeoutMs);
    h.narrowed = narrowed ?? null;
    h.checkpoints = options.checkpoints ?? false;
    try {
      await h.#start();
      h.threadId = (await h.rt.createThread({ providerTarget: TARGET, cwd })).threadId;
      return h;
    } catch (error) {
      // What opened is closed: the runtime if it started, the world, the directory.
      await (h.rt ? h.close() : world.close().then(() => rm(dir, { recursive: true, force: true }))).catch(() => {});
      throw error;
    }
  }

  async #start(): Promise<void> {
    const adapter = () => (this.narrowed ? showing(this.world.adapter(), this.narrowed) : this.world.adapter());
    const tap = () => tapped(adapter(), this.provider, this.calls, () => this.#wake());
    this.rt = await createRuntime({
      dataDir: join(this.dir, "data"),
      providers: { [TARGET]: tap(), [OTHER_TARGET]: tap() },
      // Each checkpoint is a few git processes: taken only on the paths whose rollbacks restore them.
      checkpoints: this.checkpoints,
      turnSilenceMs: null,
      // The embedder's tool a `dynamic_tool` turn calls back.
      tools: [
        {
          name: DYNAMIC_TOOL.name,
          description: "Answers every call with the same words (conformance).",
          inputSchema: { type: "object" },
          handler: () => DYNAMIC_TOOL.answer,
        },
      ],
      sessionIdleMs: null,
    });
    const afterSeq = this.records.at(-1)?.seq ?? 0;
    this.#unsubscribe = this.rt.subscribe({ afterSeq }, (record) => {
      this.records.push(record);
      this.#wake();
    });
  }

  /** Closes the runtime and opens a new one on the same data directory with a new adapter (a new session). */
  async restart(): Promise<void> {
    await this.rt.close();
    this.#unsubscribe?.();
    await this.#start();
  }

  #wake(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }

  /** Resolves once `condition` holds, checked on every record and provider event; fails after the timeout. */
  until(what: string, condition: () => boolean): Promise<void> {
    if (condition()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!condition()) return;
        this.#waiters.delete(check);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(new Error(`timed out after ${this.timeoutMs} ms waiting for ${what}`));
      }, this.timeoutMs);
      this.#waiters.add(check);
    });
  }

  /** Resolves once every record the runtime has committed so far has reached the harness. */
  async settle(): Promise<void> {
    const head = this.rt.head;
    await this.until("the log to be delivered", () => (this.records.at(-1)?.seq ?? 0) >= head);
  }

  events<T extends DomainEvent["type"]>(type: T, where: (e: EventOf<T>) => boolean = () => true): EventOf<T>[] {
    return this.records.map((r) => r.event).filter((e): e is EventOf<T> => e.type === type && where(e as EventOf<T>));
  }

  policies(where: (e: EventOf<"policy.applied">) => boolean = () => true): string[] {
    return this.events("policy.applied", where).map((e) => e.policy);
  }

  terminal(runId: string): EventOf<"run.terminal"> | undefined {
    return this.events("run.terminal", (e) => e.runId === runId)[0];
  }

  get runId(): string {
    const id = this.runIds.at(-1);
    if (!id) throw new Error("no run sent yet");
    return id;
  }

  /** A fresh user text, unique in the path. */
  nextText(kind: string): string {
    this.#n += 1;
    return `${kind} ${this.#n}`;
  }

  /** Calls the API; a typed refusal (a `TillerError`) is kept in `lastError` instead of failing the step. */
  async attempt<T>(call: () => Promise<T>): Promise<T | null> {
    this.lastError = null;
    try {
      this.lastReceipt = await call();
      return this.lastReceipt as T;
    } catch (error) {
      if (!isTillerError(error)) throw error;
      const { code, message, details } = error;
      const named = (v: unknown) => (typeof v === "string" ? v : null);
      this.lastError = { code, message, policy: named(details.policy), capability: named(details.capability) };
      return null;
    }
  }

  /** Queues the provider's behaviour and sends a user message for it; returns the run it went into. */
  async send(
    behaviour: TurnBehaviour,
    {
      mode,
      threadId = this.threadId,
      providerTarget,
    }: { mode?: "queue" | "steer"; threadId?: string; providerTarget?: string } = {},
  ): Promise<string | null> {
    const text = this.nextText(behaviour.kind);
    this.world.next(behaviour, { userText: text });
    const options = { ...(mode ? { mode } : {}), ...(providerTarget ? { providerTarget } : {}) };
    const receipt = await this.attempt(() => this.rt.sendMessage({ threadId, text, ...options }));
    if (!receipt) return null;
    if (threadId === this.threadId && !this.runIds.includes(receipt.runId)) this.runIds.push(receipt.runId);
    this.userTexts.set(receipt.runId, text);
    this.#runThreads.set(receipt.runId, threadId);
    this.lastRunId = receipt.runId;
    return receipt.runId;
  }

  /** The calls made of `method`, oldest first. */
  callsOf(method: string): AdapterCall[] {
    return this.calls.filter((c) => c.method === method);
  }

  async untilTerminal(runId: string): Promise<EventOf<"run.terminal">> {
    await this.until(`run ${runId} to end`, () => this.terminal(runId) !== undefined);
    // The provider's evidence of the run's turn, as it ended (its turn is the latest the provider took up).
    const turn = this.world.lastTurn();
    if (turn && turn.text === this.userTexts.get(runId)) this.#turns.set(runId, turn);
    return this.terminal(runId)!;
  }

  /** The provider's evidence of the latest run on `threadId` that ended (null: none reached the provider). */
  latestTurnOn(threadId: string): TurnEvidence | null {
    const runs = [...this.#runThreads].filter(([, t]) => t === threadId).map(([runId]) => runId);
    for (const runId of runs.reverse()) if (this.#turns.has(runId)) return this.#turns.get(runId)!;
    return null;
  }

  /** Waits until the provider has visibly taken the run's turn up: something of its turn reached the log. */
  async untilTurnTaken(runId: string): Promise<void> {
    await this.until(
      `the provider to take run ${runId} up`,
      () =>
        this.records.some(
          (r) =>
            (r.event.type === "node.delta" || (r.event.type === "node.started" && r.event.kind !== "root_turn")) &&
            r.event.runId === runId,
        ) || this.terminal(runId) !== undefined,
    );
  }

  async close(): Promise<void> {
    try {
      if (!this.rt.closed) await this.rt.close();
    } finally {
      this.#unsubscribe?.();
      await this.world.close().catch(() => undefined);
      await rm(this.dir, { recursive: true, force: true });
    }
  }
}
