import type { KnownFields, ProviderCapabilities } from "../../../capabilities/index.js";
import { resolveCapabilities, type ScriptedCapabilities, type ScriptedRecord } from "../capabilities.js";
import { DEFAULT_RUNTIME_MODE, type RuntimeMode } from "../../../domain/entities.js";
import { CapabilityUnsupportedError, NotFoundError, ProviderError, ResumeFailedError } from "../../../domain/errors.js";
import type {
  HandoffContext,
  ProviderAdapter,
  ProviderAdapterEvent,
  ProviderEvent,
  ProviderThreadHandle,
  SandboxPolicy,
  TurnAddress,
} from "../../contract.js";
import { EventQueue } from "../../kit/eventQueue.js";
import { ScriptedBackend, type BackendThread } from "./backend.js";
import { echoScript, type ScriptSource, type ScriptStep } from "./script.js";
import { endedCleanly, ScriptedTurn } from "./turn.js";
import { streamPace } from "./turnWaits.js";
import { deliverContext } from "../../kit/context.js";
import { defineAdapter, type AdapterDeclaring, type RequiredMethods } from "../../kit/defineAdapter.js";

/**
 * The scripted provider: a real adapter whose "model" is a script. It honours exactly the
 * capability record it is given: optional methods exist only when declared, native ids
 * appear only where identity exposes them, and so on.
 */

export interface ScriptedAdapterOptions<C extends ScriptedRecord = ScriptedRecord> {
  /** A full record, or overrides applied to `fullCapabilities()`. */
  capabilities?: C;
  script?: ScriptSource;
  /** Share a backend between adapters to model a provider that outlives the runtime. */
  backend?: ScriptedBackend;
  /** Delay between two wakes of a streaming turn; 0 yields to the event loop only. */
  chunkDelayMs?: number;
  /**
   * Chunks a streaming turn emits each time it wakes (default 1). More than one streams in bursts, as frames reach a
   * runtime from a provider's pipe: many to a read.
   */
  chunksPerWake?: number;
  /**
   * A backend gate a turn waits at after sendRun answered and before the provider takes it up
   * (before its turn.started): a provider slow to start a turn.
   */
  startGate?: (input: { text: string; turnIndex: number }) => string | undefined;
}

/**
 * The in-process scripted adapter, for the record it was given (`C`): its record typed as given
 * (`ScriptedCapabilities`: literal where given literally), and the methods that record claims (each is attached
 * exactly when its field is true).
 */
export type ScriptedAdapter<C extends ScriptedRecord = ScriptedRecord> = AdapterDeclaring<ScriptedCapabilities<C>>;

/**
 * Options whose record names only the record's fields and claims no restart survival: the provider in process has no
 * `reattachSession` (only a socket host can keep a request answerable across a restart), so a record claiming it
 * literally does not type-check (and fails `defineAdapter` at runtime, typed).
 */
export type InProcessOptions<C extends ScriptedRecord> = ScriptedAdapterOptions<C> & {
  capabilities?: KnownFields<C> &
    ("reattachSession" extends RequiredMethods<ScriptedCapabilities<C>>
      ? { sessions: { pendingRequestsSurviveRestart: false } }
      : unknown);
};

/** A turn the provider accepted and has not run yet: the next of its thread once the active one ended. */
interface QueuedTurn {
  sessionId: string;
  turn: ScriptedTurn;
  input: { text: string; context: HandoffContext | null; runtimeMode: RuntimeMode; model: string | null };
}

interface Session {
  generation: number;
  stopped: boolean;
  sandbox: SandboxPolicy;
  /** The model the session started with: every turn's, unless the record lets a turn switch it. */
  model: string | null;
  /** The mode the session started in: every turn's, unless the record lets a turn switch it. */
  runtimeMode: RuntimeMode;
  /** The embedder's tools the session was offered, by name: the only ones its turns can call. */
  tools: string[];
}

export function createScriptedAdapter<const C extends ScriptedRecord = {}>(
  options: InProcessOptions<C> = {},
): ScriptedAdapter<C> {
  const caps: ProviderCapabilities = resolveCapabilities(options.capabilities as ScriptedRecord | undefined);
  const backend = options.backend ?? new ScriptedBackend();
  const script = options.script ?? echoScript;
  const pace = streamPace(options);
  const queue = new EventQueue<ProviderAdapterEvent>();
  const sessions = new Map<string, Session>();
  /** Active turn per native thread id. */
  const active = new Map<string, { sessionId: string; turn: ScriptedTurn; ended: Promise<void> }>();
  /** Turns sent while another ran, per native thread id, in order (only where the record says it queues). */
  const waiting = new Map<string, QueuedTurn[]>();
  let generation = 0;

  const exposesThreadRef = caps.threads.exposesNativeThreadId && caps.identity.nativeThreadIds !== "none";
  const exposesTurnRef = caps.turns.exposesNativeTurnId && caps.identity.nativeTurnIds !== "none";
  const push = (sessionId: string, event: ProviderEvent) => queue.push({ sessionId, event });

  const liveSession = (sessionId: string): Session => {
    const session = sessions.get(sessionId);
    if (!session || session.stopped)
      throw new ProviderError(`scripted session ${sessionId} is not running`, { sessionId });
    return session;
  };
  const threadOf = (handle: ProviderThreadHandle): BackendThread => {
    const thread = backend.threads.get(handle.resumeCursor);
    if (!thread) throw new NotFoundError("scripted thread", handle.resumeCursor);
    return thread;
  };
  const handleOf = (thread: BackendThread): ProviderThreadHandle => ({
    threadRef: exposesThreadRef ? thread.id : null,
    resumeCursor: thread.id,
  });
  const activeTurn = (input: TurnAddress) => {
    const entry = active.get(input.thread.resumeCursor);
    if (!entry) throw new ProviderError("no active turn on this thread", { cursor: input.thread.resumeCursor });
    return entry.turn;
  };

  async function runTurn(
    sessionId: string,
    thread: BackendThread,
    turn: ScriptedTurn,
    { text, context, runtimeMode, model }: QueuedTurn["input"],
    turnIndex: number,
  ) {
    const threadRef = exposesThreadRef ? thread.id : undefined;
    const where = { ...(threadRef ? { threadRef } : {}), ...(turn.turnRef ? { turnRef: turn.turnRef } : {}) };
    const record = {
      turnRef: turn.turnRef ?? `turn-${turnIndex}`,
      userText: text,
      assistantText: "",
      status: "running" as const,
      context,
      delivered: deliverContext(context),
      runtimeMode,
      model,
    };
    thread.turns.push(record);
    await Promise.resolve(); // the turn starts after sendRun returns, as with a real provider
    const gate = options.startGate?.({ text, turnIndex });
    if (gate) await backend.gateOpened(gate);
    turn.announced = true;
    if (caps.turns.emitsTurnStarted) push(sessionId, { type: "turn.started", ...where });
    let steps: ScriptStep[];
    try {
      steps = script({ text, turnIndex });
    } catch (error) {
      steps = [{ type: "fail", message: `the script threw: ${String(error)}` }];
    }
    const terminal = await turn.run(steps, threadRef);
    // The session died with the turn: no terminal.
    if (!sessions.get(sessionId)?.stopped) {
      Object.assign(record, { assistantText: turn.assistantText, status: terminal.status });
      if (caps.turns.emitsTurnCompleted) push(sessionId, { type: "turn.terminal", ...where, ...terminal });
      else push(sessionId, { type: "session.state", state: "idle" });
    }
    // Only once its terminal is on its way does the turn stop counting as running (isTurnAlive).
    if (active.get(thread.id)?.turn === turn) {
      active.delete(thread.id);
      takeUpNext(thread);
    }
  }

  /** The turn runs now: it is its thread's active turn. */
  function begin(queued: QueuedTurn, thread: BackendThread): void {
    const { sessionId, turn, input } = queued;
    const ended = runTurn(sessionId, thread, turn, input, thread.turns.length).catch((error: unknown) => {
      push(sessionId, { type: "warning", message: `scripted turn crashed: ${String(error)}` });
    });
    active.set(thread.id, { sessionId, turn, ended });
  }

  /** Takes the queued turns `leaves` names off a thread's queue. */
  function unqueue(threadId: string, leaves: (queued: QueuedTurn, index: number) => boolean): void {
    const kept = (waiting.get(threadId) ?? []).filter((q, i) => !leaves(q, i));
    if (kept.length > 0) waiting.set(threadId, kept);
    else waiting.delete(threadId);
  }

  /** A provider that queues follow-ups takes the next one up once its thread's turn ended. */
  function takeUpNext(thread: BackendThread): void {
    const next = waiting.get(thread.id)?.[0];
    unqueue(thread.id, (_, i) => i === 0);
    if (next && !sessions.get(next.sessionId)?.stopped) begin(next, thread);
  }

  /**
   * Drops a queued turn the runtime interrupted, by its ref: it never runs. Its terminal says so where the provider
   * sends terminals; where it does not, the turn is aborted before it starts and ends at once when its time comes.
   */
  function dropQueued(threadId: string, turnRef: string | null): boolean {
    const queued = waiting.get(threadId)?.find((q) => turnRef !== null && q.turn.turnRef === turnRef);
    if (!queued) return false;
    queued.turn.abort.abort();
    if (!caps.turns.emitsTurnCompleted) return true;
    unqueue(threadId, (q) => q === queued);
    const where = { ...(exposesThreadRef ? { threadRef: threadId } : {}), turnRef: turnRef! };
    push(queued.sessionId, { type: "turn.terminal", ...where, ...endedCleanly("interrupted") });
    return true;
  }

  const adapter: ProviderAdapter = {
    provider: "scripted",
    getCapabilities: () => caps,
    async startSession({ sessionId, sandbox, runtimeMode, tools, model }) {
      generation += 1;
      sessions.set(sessionId, {
        generation,
        stopped: false,
        model: model ?? null,
        sandbox: sandbox ?? "workspace-write",
        runtimeMode: runtimeMode ?? DEFAULT_RUNTIME_MODE,
        tools: (tools ?? []).map((t) => t.name),
      });
      push(sessionId, { type: "session.state", state: "ready" });
      return { sessionId, capabilities: caps, hostGeneration: generation };
    },
    async stopSession({ sessionId }) {
      const session = sessions.get(sessionId);
      if (!session || session.stopped) return;
      session.stopped = true;
      const ending: Promise<void>[] = [];
      // Turns it held in its queue end with it, never run.
      for (const threadId of [...waiting.keys()]) unqueue(threadId, (q) => q.sessionId === sessionId);
      for (const [threadId, entry] of active) {
        if (entry.sessionId !== sessionId) continue;
        entry.turn.abort.abort();
        active.delete(threadId);
        ending.push(entry.ended);
      }
      // Its turns are over before the session says it stopped: nothing of theirs can follow.
      await Promise.all(ending);
      push(sessionId, { type: "session.state", state: "stopped", message: "session stopped" });
    },
    // Where a thread's files go is not its own: every call's address names its cwd.
    async ensureProviderThread({ sessionId, resume }) {
      liveSession(sessionId);
      if (!resume && !caps.threads.canCreateEmptyThread)
        throw new CapabilityUnsupportedError(
          "threads.canCreateEmptyThread",
          "scripted provider makes no empty threads",
        );
      if (!resume) return handleOf(backend.createThread());
      const thread = backend.threads.get(resume.cursor);
      if (!thread)
        throw new ResumeFailedError(`scripted provider has no thread for cursor ${resume.cursor}`, {
          cursor: resume.cursor,
        });
      return handleOf(thread);
    },
    async sendRun({ sessionId, thread: address, text, context, model, runtimeMode, newThread }) {
      const session = liveSession(sessionId);
      // A provider without empty threads makes the thread with its first turn, and names it in its reply.
      const made = newThread ? handleOf(backend.createThread()) : undefined;
      const handle = made ? { ...made, cwd: address.cwd } : address;
      const thread = threadOf(handle);
      if (active.has(thread.id) && !caps.turns.supportsQueuedMessages)
        throw new ProviderError("a turn is already running on this thread", { cursor: thread.id });
      const turnRef = exposesTurnRef ? backend.nextId("sturn") : undefined;
      // Files are written where the runtime says the thread lives, as with a real provider's tools.
      // A provider that cannot switch modes in session works every turn in the session's mode.
      const mode = caps.sessions.supportsRuntimeModeSwitchInSession
        ? (runtimeMode ?? DEFAULT_RUNTIME_MODE)
        : session.runtimeMode;
      const workspace = { cwd: handle.cwd, sandbox: session.sandbox, runtimeMode: mode, tools: session.tools };
      const turn = new ScriptedTurn(turnRef, caps, backend, (e) => push(sessionId, e), pace, workspace);
      const turnModel = caps.sessions.supportsModelSwitchInSession ? (model ?? session.model) : session.model;
      const queued = { sessionId, turn, input: { text, context, runtimeMode: mode, model: turnModel } };
      // A provider that queues holds a turn sent while another runs, and takes it up when that one ended.
      if (active.has(thread.id)) waiting.set(thread.id, [...(waiting.get(thread.id) ?? []), queued]);
      else begin(queued, thread);
      return { turnRef: turnRef ?? null, ...(made ? { thread: made } : {}) };
    },
    async interrupt(input) {
      if (!caps.turns.supportsInterrupt) {
        throw new CapabilityUnsupportedError("turns.supportsInterrupt", "scripted provider declared no interrupt");
      }
      liveSession(input.sessionId);
      if (dropQueued(input.thread.resumeCursor, input.turnRef)) return;
      const turn = activeTurn(input);
      // Like Codex: a provider that announces its turns knows no turn to stop before it announced it.
      if (caps.turns.emitsTurnStarted && !turn.announced)
        throw new ProviderError("no active turn to interrupt yet", { cursor: input.thread.resumeCursor });
      turn.abort.abort(); // acknowledgement only: the terminal follows as an event
    },
    async isTurnAlive(input) {
      const session = sessions.get(input.sessionId);
      if (!session || session.stopped) return false;
      const threadId = threadOf(input.thread).id;
      const entry = active.get(threadId);
      if (entry !== undefined && (input.turnRef === null || entry.turn.turnRef === input.turnRef)) return true;
      // A turn waiting in the provider's queue is alive: it runs once the turns ahead of it ended.
      return (waiting.get(threadId) ?? []).some(
        (q) => q.sessionId === input.sessionId && q.turn.turnRef === input.turnRef,
      );
    },
    async respondToRequest({ sessionId, thread, request, response }) {
      liveSession(sessionId);
      const turn = activeTurn({ sessionId, thread, turnRef: request.turnRef });
      const pending = turn.pending.find((p) =>
        request.requestRef ? p.requestRef === request.requestRef : p.ordinal === request.ordinal,
      );
      if (!pending) throw new ProviderError("no such pending request", { request });
      pending.answer(response);
    },
    streamEvents: () => queue,
    async close() {
      for (const sessionId of sessions.keys()) await adapter.stopSession({ sessionId });
      queue.close();
    },
  };

  if (caps.turns.supportsActiveSteering) {
    adapter.steerRun = async (input) => {
      liveSession(input.sessionId);
      activeTurn(input).steers.push(input.text);
    };
  }
  if (caps.threads.canReadThreadSnapshot) {
    adapter.readThreadSnapshot = async ({ thread }) =>
      backend.snapshot(threadOf(thread), { thread: exposesThreadRef, turn: exposesTurnRef });
  }
  if (caps.context.canGenerateSummaries) {
    adapter.summarize = async ({ sessionId, transcript, maxChars }) => {
      liveSession(sessionId);
      backend.summaries.push({ transcript, maxChars });
      // A provider's summary: condensed to the bound, the newest of the conversation kept.
      const head = "Summary written by the scripted provider:\n";
      return head + transcript.slice(Math.max(0, transcript.length - (maxChars - head.length)));
    };
  }
  if (caps.threads.canRollbackThread) {
    adapter.rollbackThread = async ({ thread: handle, turns }) => {
      const thread = threadOf(handle);
      thread.turns.splice(Math.max(0, thread.turns.length - turns));
      return { snapshot: backend.snapshot(thread, { thread: exposesThreadRef, turn: exposesTurnRef }) };
    };
  }
  if (caps.subagents.canWaitForSubagents) {
    adapter.waitForSubagent = async ({ sessionId, thread, childThreadRef, signal }) => {
      liveSession(sessionId);
      const subagent = active.get(thread.resumeCursor)?.turn.subagents.get(childThreadRef);
      if (subagent) return { status: await untilAborted(subagent.ended, signal) };
      // Ended already: its child thread tells how (where the provider keeps it).
      const status = backend.threads.get(childThreadRef)?.turns[0]?.status;
      if (!status || status === "running") throw new ProviderError("no such subagent", { childThreadRef });
      return { status };
    };
  }
  if (caps.subagents.canCloseSubagents) {
    adapter.closeSubagent = async ({ sessionId, thread, childThreadRef }) => {
      liveSession(sessionId);
      const subagent = active.get(thread.resumeCursor)?.turn.subagents.get(childThreadRef);
      if (!subagent) throw new ProviderError("no subagent on this child thread", { childThreadRef });
      subagent.close.abort(); // acknowledgement only: its end follows as events (an ended one stays as it ended)
    };
  }
  if (caps.threads.canForkThread) {
    adapter.forkThread = async ({ thread: handle, afterTurnRef }) => {
      const source = threadOf(handle);
      if (source.parentId !== undefined && !caps.threads.canForkFromSubagentThread)
        throw new CapabilityUnsupportedError(
          "threads.canForkFromSubagentThread",
          "the scripted provider forks no subagent thread",
        );
      const cut =
        afterTurnRef === null ? source.turns.length : source.turns.findIndex((t) => t.turnRef === afterTurnRef) + 1;
      if (cut === 0) throw new ProviderError(`no turn ${afterTurnRef} to fork after`);
      // The fork's files go where its sendRun's address says, like every turn's.
      return handleOf(backend.createThread(source.turns.slice(0, cut).map((t) => ({ ...t }))));
    };
  }
  // The record is what it was given (typed `ScriptedCapabilities<C>`), and each method it claims is attached above:
  // checked here at runtime, since the compiler cannot follow a field's value to the method attached on it.
  return defineAdapter(adapter as ScriptedAdapter<C>);
}

/** The promise's value, unless `signal` aborts first (rejects with its reason). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    void promise.then((value) => {
      signal.removeEventListener("abort", onAbort);
      resolve(value);
    });
  });
}
