import { randomUUID } from "node:crypto";
import { forkSession, getSessionInfo, getSessionMessages, query } from "@anthropic-ai/claude-agent-sdk";
import type { RuntimeMode } from "../../../domain/entities.js";
import { ProviderError, ResumeFailedError } from "../../../domain/errors.js";
import { ClaudeThreadMapper, cutAfter } from "../mapper.js";
import type { SDKMessage } from "../protocol/sdk.js";
import type { HostParams } from "../transport.js";
import { userInbox } from "./inbox.js";
import { dropHeldInterrupt, holdInterrupt, tookUpPrompt } from "./interrupts.js";
import { modeOptions, permissionModeOf } from "./modes.js";
import { permissionGate } from "./permissions.js";
import { emit, type Prompt, type Thread } from "./thread.js";

/**
 * The host's provider threads, each an SDK query on one Claude session, and what becomes of a thread whose Claude
 * process went away on its own: started again for the prompt it never wrote down, else failed and revived by the next
 * turn.
 */

type OpenParams = HostParams<"openThread">;

/** Set by `init`: a Claude Code executable to drive instead of the one the SDK ships. */
let executable: string | undefined;
let initialized = false;
const threads = new Map<string, Thread>();
/** Threads whose Claude process went away on its own (it could not start, or it died), and why. */
const gone = new Map<string, { thread: Thread; reason: string }>();

export function init(params: HostParams<"init">): void {
  executable = params.executable;
  initialized = true;
}

/**
 * `resume` a session, `fork` one (into a new session), or start a new one; `id`: a new session's id (default: a fresh
 * one).
 */
function open(params: OpenParams): Thread {
  if (!initialized) throw new ProviderError("claude host: init first");
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
  } as Omit<Thread, "query" | "push"> as Thread;
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
      ...(executable ? { pathToClaudeCodeExecutable: executable } : {}),
      ...resumeOptions,
      canUseTool: permissionGate(thread),
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

/** Opens a thread, or takes up the one open on the session resumed. */
export async function openThread(params: OpenParams): Promise<string> {
  if (params.resume && !params.fork && threads.has(params.resume)) return params.resume;
  if (params.resume && !(await getSessionInfo(params.resume, { dir: params.cwd })))
    throw new ResumeFailedError(`claude has no session ${params.resume}`, { cursor: params.resume });
  // Always the cwd the runtime names, a fork's too: after a restart this host may never have
  // seen the parent. (The runtime forks within one directory, where the SDK keeps the parent's session.)
  return open(params).cursor;
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

/** The open thread, or the reason it is not. */
export function thread(cursor: string): Thread {
  const found = threads.get(cursor);
  if (!found) throw new ProviderError(gone.get(cursor)?.reason ?? `claude host: no open thread ${cursor}`);
  return found;
}

/** The open thread, if any. */
export const openOne = (cursor: string): Thread | undefined => threads.get(cursor);

/** Sends a turn's prompt, its Claude process started again if it went away. */
export async function sendTurn({ cursor, text, model, runtimeMode }: HostParams<"send">): Promise<void> {
  const t = (await revive(cursor)) ?? thread(cursor);
  // A model change between turns stays in the session (`/model`).
  if (typeof model === "string" && model !== t.model) {
    await t.query.setModel(model);
    t.model = model;
  }
  await useMode(t, runtimeMode);
  t.push(text);
}

/**
 * Claude rolls back by resuming a copy of its session cut at an earlier message (`forkSession` up to it): the cut is
 * on disk at once, so it holds across restarts and a second rollback counts from it. The turns are read from Claude's
 * transcript. A thread whose Claude process went away is cut just the same: only its transcript counts.
 */
export async function rollback({ cursor, turns }: HostParams<"rollback">): Promise<string> {
  const t = threads.get(cursor) ?? gone.get(cursor)?.thread ?? thread(cursor);
  const at = cutAfter(await transcript(t), turns);
  if (!at) throw new ProviderError(`claude thread ${t.cursor}: cannot drop ${turns} turns`);
  const { sessionId: cut } = await forkSession(t.cursor, { dir: t.cwd, upToMessageId: at });
  if (threads.get(cursor) === t) t.query.close();
  threads.delete(cursor);
  gone.delete(cursor);
  const { sessionId, cwd, model, sandbox, runtimeMode } = t;
  return open({ sessionId, cwd, model, sandbox, runtimeMode, resume: cut }).cursor;
}

/** Closes the threads of a provider session, and forgets those that went away. */
export function closeThreads(sessionId: string): void {
  for (const t of [...threads.values()]) if (t.sessionId === sessionId) (t.query.close(), threads.delete(t.cursor));
  for (const [cursor, dead] of gone) if (dead.thread.sessionId === sessionId) gone.delete(cursor);
}

/** Closes every thread (the host is going away). */
export function closeAll(): void {
  for (const t of threads.values()) t.query.close();
}
