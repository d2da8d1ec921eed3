/**
 * The Claude host: one process per Claude target, run by the runtime's host supervisor. It
 * drives the Claude Agent SDK (one SDK query, with streaming input, per provider thread) and
 * speaks JSON-RPC over stdio with the runtime: requests in, `event` notifications out.
 * Permission prompts (`canUseTool`) become runtime requests answered with `respond`, unless the turn's runtime mode
 * refuses them unasked (`modes.ts`).
 */
import { randomUUID, type UUID } from "node:crypto";
import { createInterface } from "node:readline";
import {
  forkSession,
  getSessionInfo,
  getSessionMessages,
  query,
  type PermissionMode,
  type Query,
  type SDKMessage,
} from "@anthropic-ai/claude-agent-sdk";
import { errorResponse, notification, parseMessage, result } from "../../kit/jsonRpc.js";
import type { RuntimeMode } from "../../../domain/entities.js";
import { ResumeFailedError, ProviderError } from "../../../domain/errors.js";
import type { SandboxPolicy } from "../../contract.js";
import { ClaudeThreadMapper, cutAfter, permissionPayload } from "../mapper.js";
import { userInbox } from "./inbox.js";
import { modeOptions, permissionModeOf, refusal } from "./modes.js";

/** Claude's environment is this process's own (set when the runtime spawned it), never a call's. */
interface Init {
  executable?: string;
}

/**
 * How long an interrupt waits for Claude to take up its prompt, and how long after it a turn that has not stopped still
 * counts as alive.
 */
const INTERRUPT_GRACE_MS = 30_000;

/**
 * A prompt as sent to Claude. `uuid` is the SDK user message's id, chosen here: Claude writes the prompt down under it,
 * so its session tells whether this very prompt reached it (not an earlier one of the same words).
 */
interface Prompt {
  text: string;
  uuid: UUID;
}

interface Thread {
  cursor: string;
  sessionId: string;
  cwd: string;
  model: string | null;
  sandbox: SandboxPolicy;
  /** The mode of the turn in flight, or of the last one: a Claude process started again for the thread starts in it. */
  runtimeMode: RuntimeMode;
  /** Claude's permission mode, as it was started in or last said (it moves itself in and out of plan mode). */
  permissionMode: PermissionMode;
  mapper: ClaudeThreadMapper;
  query: Query;
  /** Sends text as a new prompt, or a prompt again under its own id (to a new Claude process). */
  push(prompt: string | Prompt): void;
  /** The prompt of the turn in flight (sent, its `result` not in yet), or null. */
  prompt: Prompt | null;
  /** This Claude process was started again to take the turn in flight (once per prompt). */
  retried: boolean;
  /** The session this one forks, for a fork Claude may not have written yet. */
  forkOf: string | null;
  /** Claude has taken up the prompt in flight (a message of its turn came). */
  running: boolean;
  /** An interrupt that came before Claude took up the prompt: sent as soon as it does, or when this timer fires. */
  heldInterrupt: NodeJS.Timeout | null;
  /** When the turn in flight was asked to stop (null: it was not). */
  interruptedAt: number | null;
}

const send = (message: unknown) => process.stdout.write(`${JSON.stringify(message)}\n`);
let init: Init | null = null;
const threads = new Map<string, Thread>();
/** Threads whose Claude process went away on its own (it could not start, or it died), and why. */
const gone = new Map<string, { thread: Thread; reason: string }>();
/** A permission answer: allow (with the user's answers, for AskUserQuestion) or deny. */
interface Answer {
  allow: boolean;
  message: string;
  answers?: Record<string, string | string[]>;
}
const pending = new Map<string, (answer: Answer) => void>();

function emit(thread: Thread, event: unknown): void {
  send(notification("event", { sessionId: thread.sessionId, event }));
}

type OpenParams = {
  sessionId: string;
  cwd: string;
  model: string | null;
  sandbox: SandboxPolicy;
  /** The mode the thread starts in; each turn then names its own. */
  runtimeMode: RuntimeMode;
  resume?: string;
  fork?: string;
  id?: string;
};

/**
 * `resume` a session, `fork` one (into a new session), or start a new one; `id`: a new session's id (default: a fresh
 * one).
 */
function open(params: OpenParams): Thread {
  if (!init) throw new ProviderError("claude host: init first");
  const cursor = params.resume ?? params.id ?? randomUUID();
  const inbox = userInbox();
  const mapper = new ClaudeThreadMapper(cursor);
  const thread = {
    cursor,
    sessionId: params.sessionId,
    cwd: params.cwd,
    model: params.model,
    sandbox: params.sandbox,
    runtimeMode: params.runtimeMode,
    permissionMode: permissionModeOf(params.sandbox, params.runtimeMode),
    mapper,
    prompt: null,
    retried: false,
    forkOf: params.fork ?? null,
    running: false,
    heldInterrupt: null,
    interruptedAt: null,
  } as Thread;
  const resumeOptions = params.fork
    ? { resume: params.fork, forkSession: true, sessionId: cursor }
    : params.resume
      ? { resume: params.resume }
      : { sessionId: cursor };
  thread.query = query({
    prompt: inbox.input,
    options: {
      cwd: params.cwd,
      includePartialMessages: true,
      forwardSubagentText: true,
      ...modeOptions(thread.sandbox, thread.runtimeMode),
      ...(params.model ? { model: params.model } : {}),
      ...(init.executable ? { pathToClaudeCodeExecutable: init.executable } : {}),
      ...resumeOptions,
      canUseTool: async (tool, toolInput, options) => {
        // The turn's mode may refuse it without asking anyone.
        const refused = refusal(tool, thread.runtimeMode);
        if (refused !== null) return { behavior: "deny", message: refused };
        const requestRef = options.toolUseID ?? randomUUID();
        // A subagent's own prompt hangs under the subagent: Claude asks before it forwards the subagent's tool use, so
        // the request names the subagent itself, whose start is out once its agent id is known.
        const subagent = options.agentID ? await mapper.subagentRef(options.agentID, options.signal) : undefined;
        if (options.signal.aborted) return { behavior: "deny", message: "interrupted" };
        emit(thread, {
          type: "request.opened",
          threadRef: cursor,
          requestRef,
          itemRef: subagent ?? options.toolUseID,
          request: permissionPayload(tool, toolInput),
        });
        const answer = await new Promise<Answer>((resolve) => {
          pending.set(requestRef, resolve);
          options.signal.addEventListener("abort", () => resolve({ allow: false, message: "interrupted" }), {
            once: true,
          });
        });
        pending.delete(requestRef);
        emit(thread, {
          type: "request.resolved",
          threadRef: cursor,
          requestRef,
          outcome: answer.allow ? "accept" : "decline",
        });
        if (!answer.allow) return { behavior: "deny", message: answer.message };
        // AskUserQuestion takes its answers keyed by question text; several choices are comma-separated.
        const answers =
          answer.answers &&
          Object.fromEntries(Object.entries(answer.answers).map(([q, a]) => [q, Array.isArray(a) ? a.join(", ") : a]));
        return { behavior: "allow", updatedInput: answers ? { ...toolInput, answers } : toolInput };
      },
    },
  });
  thread.push = (prompt) => {
    thread.prompt = typeof prompt === "string" ? { text: prompt, uuid: randomUUID() } : prompt;
    inbox.push(thread.prompt.text, thread.prompt.uuid);
  };
  void (async () => {
    let ended = "Claude Code exited";
    try {
      for await (const message of thread.query) {
        noteMode(thread, message);
        // The first message of a turn says Claude took up its prompt (the SDK keeps Claude's own
        // session-state messages to itself).
        if (thread.prompt !== null && !thread.running && message.type !== "result") await tookUpPrompt(thread);
        for (const event of mapper.map(message)) {
          if (event.type === "turn.terminal") {
            Object.assign(thread, { prompt: null, retried: false, running: false, interruptedAt: null });
            dropHeldInterrupt(thread);
          }
          emit(thread, event);
        }
      }
    } catch (error) {
      // The SDK also throws after an error result (an interrupt), whose terminal was already mapped.
      ended = `Claude Code failed: ${error instanceof Error ? error.message : String(error)}`;
    }
    if (threads.get(cursor) === thread) await wentAway(thread, ended); // else: closed on purpose
  })();
  threads.set(cursor, thread);
  gone.delete(cursor);
  return thread;
}

/** Claude took up the prompt in flight: an interrupt held for it goes out now. */
async function tookUpPrompt(thread: Thread): Promise<void> {
  thread.running = true;
  if (thread.heldInterrupt) await sendHeldInterrupt(thread);
}

/** Holds an interrupt until Claude takes up the prompt, or INTERRUPT_GRACE_MS at the most. */
function holdInterrupt(thread: Thread): void {
  // One timer per held interrupt: a timer of an earlier turn's interrupt must never send this one early.
  dropHeldInterrupt(thread);
  thread.heldInterrupt = setTimeout(() => void sendHeldInterrupt(thread), INTERRUPT_GRACE_MS).unref();
}

function dropHeldInterrupt(thread: Thread): void {
  if (thread.heldInterrupt) clearTimeout(thread.heldInterrupt);
  thread.heldInterrupt = null;
}

async function sendHeldInterrupt(thread: Thread): Promise<void> {
  dropHeldInterrupt(thread);
  await interruptNow(thread).catch((error: unknown) =>
    emit(thread, { type: "warning", threadRef: thread.cursor, message: `interrupt failed: ${String(error)}` }),
  );
}

/**
 * Interrupts Claude. A prompt it has not taken up yet survives a plain interrupt (its receipt lists
 * the prompt's uuid under `still_queued`, and the prompt then runs): the interrupt is held again,
 * for the turn's first message. A message that only looked like that turn's start is thus never
 * the end of the interrupt.
 */
async function interruptNow(thread: Thread): Promise<void> {
  const receipt = await thread.query.interrupt();
  const uuid = thread.prompt?.uuid;
  if (uuid !== undefined && receipt?.still_queued?.includes(uuid)) {
    thread.running = false;
    holdInterrupt(thread);
  }
}

/**
 * Claude's process went away on its own (it could not start, or it died). A prompt it never
 * wrote down is taken by a new Claude process, within the same turn (once): the runtime already
 * counts that turn, and a rollback counts Claude's prompts. Otherwise the turn in flight fails;
 * the thread stays, and the next turn starts Claude again.
 */
async function wentAway(thread: Thread, reason: string): Promise<void> {
  const { cursor, prompt } = thread;
  dropHeldInterrupt(thread); // this process cannot take it: it carries over below, if the turn does
  threads.delete(cursor);
  gone.set(cursor, { thread, reason });
  if (prompt !== null && !thread.retried && !(await wroteDown(thread, prompt))) {
    const again = await revive(cursor);
    if (again) {
      emit(thread, {
        type: "warning",
        threadRef: cursor,
        message: `${reason}; Claude was started again and given the prompt`,
      });
      again.retried = true;
      // An interrupt the dead process was asked for (held, or sent too late) applies to the new one.
      if (thread.interruptedAt !== null) {
        again.interruptedAt = thread.interruptedAt;
        again.mapper.interrupting = true;
        holdInterrupt(again);
      }
      again.push(prompt);
      return;
    }
  }
  if (prompt !== null)
    emit(thread, {
      type: "turn.terminal",
      threadRef: cursor,
      status: "failed",
      threadDisposition: "reusable",
      failureClass: "provider_error",
      message: reason,
      retryable: false,
    });
  else emit(thread, { type: "warning", threadRef: cursor, message: reason });
}

const transcript = (t: { cursor: string; cwd: string }) => getSessionMessages(t.cursor, { dir: t.cwd }).catch(() => []);

/** Claude wrote this prompt down in the thread's session (so it took it up), by the id it was sent under. */
async function wroteDown(thread: Thread, prompt: Prompt): Promise<boolean> {
  return (await transcript(thread)).some((message) => message.uuid === prompt.uuid);
}

/**
 * A thread whose Claude process went away, started again: resuming its session when Claude
 * wrote it down, else as the fork or new session it was. Null when it is not gone (or was closed).
 */
async function revive(cursor: string): Promise<Thread | null> {
  const dead = gone.get(cursor);
  if (!dead || threads.has(cursor)) return threads.get(cursor) ?? null;
  const { sessionId, cwd, model, sandbox, runtimeMode, forkOf } = dead.thread;
  const written =
    (await transcript(dead.thread)).length > 0 ||
    (await getSessionInfo(cursor, { dir: cwd }).catch(() => undefined)) !== undefined;
  if (gone.get(cursor) !== dead) return threads.get(cursor) ?? null; // revived or closed meanwhile
  return open({
    sessionId,
    cwd,
    model,
    sandbox,
    runtimeMode,
    ...(written ? { resume: cursor } : forkOf ? { fork: forkOf, id: cursor } : { id: cursor }),
  });
}

/** Claude says its permission mode when its session starts a turn and whenever the mode changes (`status`). */
function noteMode(thread: Thread, message: SDKMessage): void {
  if (message.type === "system" && "permissionMode" in message && message.permissionMode)
    thread.permissionMode = message.permissionMode;
}

/**
 * Puts the thread in the turn's mode before its prompt, where Claude is in another: a turn of another mode than the
 * last, or after Claude moved itself in or out of plan mode (EnterPlanMode, ExitPlanMode). Claude answers with the
 * mode now in effect: a turn is never sent in another than its own.
 */
async function useMode(thread: Thread, mode: RuntimeMode): Promise<void> {
  const wanted = permissionModeOf(thread.sandbox, mode);
  if (thread.permissionMode !== wanted) {
    const now = (await thread.query.setPermissionMode(wanted))?.mode ?? wanted;
    if (now !== wanted)
      throw new ProviderError(`claude thread ${thread.cursor}: asked for permission mode ${wanted}, is in ${now}`);
    thread.permissionMode = now;
  }
  thread.runtimeMode = mode;
}

function thread(cursor: string): Thread {
  const found = threads.get(cursor);
  if (!found) throw new ProviderError(gone.get(cursor)?.reason ?? `claude host: no open thread ${cursor}`);
  return found;
}

/** The thread, its Claude process started again if it went away. */
async function live(cursor: string): Promise<Thread> {
  return (await revive(cursor)) ?? thread(cursor);
}

async function handle(method: string, params: Record<string, unknown>): Promise<unknown> {
  switch (method) {
    case "init":
      init = params as unknown as Init;
      return null;
    case "openThread": {
      const p = params as unknown as OpenParams;
      if (p.resume && !p.fork && threads.has(p.resume)) return { cursor: p.resume };
      if (p.resume && !(await getSessionInfo(p.resume, { dir: p.cwd })))
        throw new ResumeFailedError(`claude has no session ${p.resume}`, { cursor: p.resume });
      // Always the cwd the runtime names, a fork's too: after a restart this host may never have
      // seen the parent. (The runtime forks within one directory, where the SDK keeps the parent's session.)
      return { cursor: open(p).cursor };
    }
    case "send": {
      const t = await live(String(params.cursor));
      // A model change between turns stays in the session (`/model`).
      if (typeof params.model === "string" && params.model !== t.model) {
        await t.query.setModel(params.model);
        t.model = params.model;
      }
      await useMode(t, params.runtimeMode as RuntimeMode);
      t.push(String(params.text));
      return null;
    }
    case "turnAlive": {
      // Alive while Claude's process runs and the prompt in flight has no result yet, unless it
      // was asked to stop long ago and still has not: then Claude cannot vouch for it.
      const t = threads.get(String(params.cursor));
      const stuck = t?.interruptedAt != null && Date.now() - t.interruptedAt > INTERRUPT_GRACE_MS;
      return { alive: t !== undefined && t.prompt !== null && !stuck };
    }
    case "interrupt": {
      const t = thread(String(params.cursor));
      // Only a turn in flight is interrupted: a stale flag would call the next failure an interrupt.
      if (t.prompt === null) return null;
      t.mapper.interrupting = true;
      t.interruptedAt ??= Date.now();
      // Claude ignores an interrupt that comes before it took up the prompt (the prompt stays
      // queued and its turn then runs on): hold it until the turn's first message, or send it
      // anyway once the hold has lasted INTERRUPT_GRACE_MS.
      if (!t.running) holdInterrupt(t);
      else await interruptNow(t);
      return null;
    }
    case "respond": {
      const resolve = pending.get(String(params.requestRef));
      if (!resolve) throw new ProviderError(`claude host: request ${String(params.requestRef)} is not pending`);
      const answers = params.answers as Answer["answers"];
      resolve({
        allow: params.allow === true,
        message: String(params.message ?? "The user declined."),
        ...(answers ? { answers } : {}),
      });
      return null;
    }
    case "rollback": {
      // Claude rolls back by resuming a copy of its session cut at an earlier message
      // (`forkSession` up to it): the cut is on disk at once, so it holds across restarts
      // and a second rollback counts from it. The turns are read from Claude's transcript.
      // A thread whose Claude process went away is cut just the same: only its transcript counts.
      const cursor = String(params.cursor);
      const t = threads.get(cursor) ?? gone.get(cursor)?.thread ?? thread(cursor);
      const turns = Number(params.turns);
      const at = cutAfter(await transcript(t), turns);
      if (!at) throw new ProviderError(`claude thread ${t.cursor}: cannot drop ${turns} turns`);
      const { sessionId: cut } = await forkSession(t.cursor, { dir: t.cwd, upToMessageId: at });
      if (threads.get(cursor) === t) t.query.close();
      threads.delete(cursor);
      gone.delete(cursor);
      const { sessionId, cwd, model, sandbox, runtimeMode } = t;
      return { cursor: open({ sessionId, cwd, model, sandbox, runtimeMode, resume: cut }).cursor };
    }
    case "closeThreads":
      for (const t of [...threads.values()])
        if (t.sessionId === params.sessionId) (t.query.close(), threads.delete(t.cursor));
      for (const [cursor, dead] of gone) if (dead.thread.sessionId === params.sessionId) gone.delete(cursor);
      return null;
    default:
      throw Object.assign(new Error(`unknown method ${method}`), { code: -32601 });
  }
}

createInterface({ input: process.stdin })
  .on("line", (line) => {
    const message = parseMessage(line);
    if (!message || !("method" in message) || !("id" in message)) return;
    handle(message.method, (message.params ?? {}) as Record<string, unknown>).then(
      (value) => send(result(message.id as number, value)),
      (error: unknown) => send(errorResponse(message.id as number, error)),
    );
  })
  .on("close", () => {
    for (const t of threads.values()) t.query.close();
    process.exit(0);
  });
process.on("SIGTERM", () => {
  for (const t of threads.values()) t.query.close();
  process.exit(0);
});
send(notification("host.ready", { pid: process.pid, protocol: 1 }));
