import { DEFAULT_RUNTIME_MODE, sameRuntimeMode, type RuntimeMode } from "../../domain/entities.js";
import { HostUnavailableError, ProviderError, ResumeFailedError } from "../../domain/errors.js";
import { INVALID_REQUEST } from "../kit/jsonRpc.js";
import type { SupervisorPolicy } from "../../machines/hostSupervisor.js";
import type { SpawnedHost } from "../kit/hostSpec.js";
import type { HostSpec } from "../kit/hostSpec.js";
import { hosted } from "../kit/hosted.js";
import type { FrameRing } from "../kit/ring.js";
import type { DynamicToolDefinition, ProviderEvent, ProviderThreadHandle, SandboxPolicy } from "../contract.js";
import { codexCapabilities, codexVersion, type CodexCapabilities } from "./capabilities.js";
import {
  collaborationMode,
  mapNotification,
  mapServerRequest,
  nativeResponse,
  snapshotOf,
  steerInput,
  turnInput,
  threadOpening,
  type ThreadTuning,
} from "./mapper.js";
import {
  CODEX_SERVER_NOTIFICATIONS,
  type AskForApproval,
  type CodexServerRequests,
  type ThreadStartResponse,
} from "./protocol/types.js";
import { dynamicTools } from "./tools.js";
import { appServerLaunch, CodexChannel, isAnswered, resolveCodexBinary, type CodexLaunchOptions } from "./transport.js";
import { defineAdapter, type AdapterDeclaring } from "../kit/defineAdapter.js";

/**
 * Codex through `codex app-server` (JSON-RPC on stdio), in a host process owned by the
 * runtime's supervisor: the sessions of a target share one app-server; each session is a
 * lease plus the threads it opened. The capability record comes from the handshake and the
 * session's runtime mode: Codex's planning differs by collaboration mode (mapper.ts), so a session
 * works in the one mode it started in (`supportsRuntimeModeSwitchInSession: false`), and
 * sessions of different modes share the app-server (every turn names its mode and policy).
 *
 * The model: Codex's configured provider (its home's `config.toml`, its login), or any
 * OpenAI-compatible endpoint through `model: { baseUrl, apiKeyEnv, name?, maxRetries? }`
 * (`baseUrl` as OpenAI clients take it, e.g. `http://127.0.0.1:8080/v1`), which needs no config
 * file: the endpoint goes on the app-server's command line as `-c` overrides, and the key is read
 * from the named variable (of `env`, else of the embedder's environment) into memory when the
 * adapter is created (unset: `invalid_input`) and handed to the app-server's environment only:
 * never logged, in no argument or file (the variable is kept out of Codex's shell snapshot), in
 * the host key as a hash. Any other Codex setting: `config` (`-c key=value`). GAP.md, runtime-owned state.
 */

export interface CodexAdapterOptions extends CodexLaunchOptions {
  /**
   * The approval policy of sessions whose runtime mode asks before acting (`approvals: "on_request"`);
   * omitted: Codex's configured one. A session that never asks runs under `never`.
   */
  approvalPolicy?: Extract<AskForApproval, string>;
  /** Host lifecycle (startup timeout, idle TTL, restart budget). */
  policy?: Partial<SupervisorPolicy>;
  /** Sees every raw frame to and from the app-server (the transcript recorder); unredacted, so never logged. */
  tap?: (direction: "in" | "out", line: string) => void;
}

/** What Codex runs a thread under when its config names no approval policy (measured on the pinned binary). */
const CODEX_DEFAULT_APPROVAL_POLICY = "on-request";

interface Conn {
  /** The binary's version, from the handshake: the record of each session's mode is that version's. */
  version: string;
  /** Prefixes this app-server's request ids (they restart at 0 in every process). */
  serial: number;
}

/** Its record typed as declared: it serves what the record claims (steering, snapshot, rollback, fork). */
export type CodexAdapter = AdapterDeclaring<CodexCapabilities> & {
  readonly hostSpec: HostSpec;
  hostPid(sessionId: string): number | null;
};

export function createCodexAdapter(options: CodexAdapterOptions = {}): CodexAdapter {
  const binary = resolveCodexBinary(options.binary);
  const host = hosted("codex", {
    forget: (sessionId) => settings.delete(sessionId),
    goodbye: async (sessionId, lease) => {
      const owned = [...threadSessions].filter(([, owner]) => owner === sessionId).map(([thread]) => thread);
      for (const thread of owned) {
        threadSessions.delete(thread);
        tunings.delete(thread);
        retired.add(thread);
        // Best effort: the app-server stops sending this thread's events to us.
        await (lease.channel as CodexChannel)
          .send("thread/unsubscribe", { threadId: thread }, { timeoutMs: 2_000 })
          .catch(() => undefined);
      }
    },
  });
  const { queue, sessions } = host;
  /**
   * What each session's threads and turns run under: its sandbox, the runtime mode it started in, and the embedder's
   * tools it was offered (Codex's dynamic tools, given to every thread it starts).
   */
  const settings = new Map<
    string,
    { sandbox: SandboxPolicy; runtimeMode: RuntimeMode; tools: DynamicToolDefinition[] }
  >();
  const conns = new WeakMap<object, Conn>();
  /** Which session opened each native thread (events are routed by thread id). */
  const threadSessions = new Map<string, string>();
  /** Approvals waiting for an answer, by `<app-server serial>:<native request id>`. */
  const pending = new Map<string, { channel: CodexChannel; id: number; method: keyof CodexServerRequests }>();
  /** Threads of stopped sessions: their late events belong to no session. */
  const retired = new Set<string>();
  let serials = 0;
  /** Each native thread's model and effort, which every turn's collaboration mode restates. */
  const tunings = new Map<string, ThreadTuning>();
  /** File changes by item id: a file-change approval names only the item. */
  const fileChanges = new Map<string, { path: string; diff: string }>();
  let declared: CodexCapabilities | null = null;

  const sessionFor = (channel: CodexChannel, threadRef: string | undefined): string | undefined => {
    const owner = threadRef ? threadSessions.get(threadRef) : undefined;
    if (owner) return sessions.find(owner) ? owner : undefined;
    if (threadRef && retired.has(threadRef)) return undefined;
    // A thread nobody opened (a subagent's): the session on this app-server, when there is just one.
    const candidates = sessions
      .entries()
      .filter(([, lease]) => lease.channel === channel)
      .map(([id]) => id);
    return candidates.length === 1 ? candidates[0] : undefined;
  };
  const emit = (channel: CodexChannel, event: ProviderEvent) => {
    const sessionId = sessionFor(channel, "threadRef" in event ? event.threadRef : undefined);
    if (sessionId) queue.push({ sessionId, event });
  };
  const warn = (channel: CodexChannel, threadRef: string | null, message: string) =>
    emit(channel, { type: "warning", ...(threadRef ? { threadRef } : {}), message });

  const connect = async (host: SpawnedHost, ring: FrameRing): Promise<CodexChannel> => {
    const channel = new CodexChannel(host.child, ring);
    channel.tap = options.tap ?? null;
    channel.expectNotifications(CODEX_SERVER_NOTIFICATIONS);
    const serial = ++serials;
    channel.onFailed(() => {
      for (const [ref, entry] of pending) if (entry.channel === channel) pending.delete(ref);
    });
    channel.onCodexNotification(
      (notification) => {
        for (const mapped of mapNotification(notification)) {
          const event =
            mapped.type === "request.resolved" && mapped.requestRef
              ? { ...mapped, requestRef: `${serial}:${mapped.requestRef}` }
              : mapped;
          if (event.type === "item.started" && event.kind === "file_change" && event.itemRef) {
            fileChanges.set(event.itemRef, { path: event.detail?.path ?? "", diff: event.detail?.diff ?? "" });
          }
          if (event.type === "request.resolved" && event.requestRef) pending.delete(event.requestRef);
          emit(channel, event);
        }
      },
      (error, where) => {
        // A turn's end of the wrong shape still ends it: failed at once as a protocol error, never left running
        // until the watchdog (the turn is over on Codex's side, whatever the frame says). One that names no thread
        // cannot be placed: said in the log, as any other.
        if (where.method === "turn/completed" && where.threadId)
          return emit(channel, {
            type: "turn.terminal",
            threadRef: where.threadId,
            ...(where.turnId ? { turnRef: where.turnId } : {}),
            status: "failed",
            threadDisposition: "reusable",
            failureClass: error.code,
            message: error.message,
            retryable: false,
          });
        // Any other frame of the wrong shape: not projected (it may be a newer binary's), said in the log.
        warn(channel, null, `${error.code}: ${error.message}`);
      },
    );
    channel.onCodexRequest(
      (request, id) => {
        const opened = isAnswered(request) ? mapServerRequest(request, id, fileChanges) : null;
        if (opened && isAnswered(request)) {
          const requestRef = `${serial}:${id}`;
          pending.set(requestRef, { channel, id, method: request.method });
          return emit(channel, { ...opened, requestRef });
        }
        // Not projected: refused at once so the turn is never stuck on it; said in the log.
        channel.respondError(id, `${request.method} is not supported by this client`);
        const threadRef = isAnswered(request) ? request.params.threadId : request.threadId;
        warn(channel, threadRef, `codex request ${request.method} is not supported by this adapter; declined`);
      },
      (error, id) => {
        channel.respondError(id, "the request does not match the protocol this client speaks");
        warn(channel, null, `${error.code}: ${error.message}`);
      },
    );
    const version = codexVersion((await channel.initialize()).userAgent);
    // Checked before `initialized`, so an unsupported binary fails the connection rather than a later session.
    const capabilities = codexCapabilities(version);
    channel.notify("initialized");
    conns.set(channel, { version, serial });
    declared ??= capabilities;
    return channel;
  };

  const spec: HostSpec = {
    target: "codex",
    ...appServerLaunch(binary, options),
    connect,
    ...(options.policy ? { policy: options.policy } : {}),
  };

  const channelOf = (sessionId: string) => sessions.lease(sessionId).channel as CodexChannel;

  const adapter: CodexAdapter = {
    ...host.methods(spec),
    provider: "codex",
    // The Default-mode record (before a handshake, the supported version's); each session announces its own mode's.
    getCapabilities: () => declared ?? codexCapabilities("0.171.0"),
    async startSession({ sessionId, sandbox, runtimeMode, tools }) {
      const lease = await sessions.open(sessionId, spec);
      const mode = runtimeMode ?? DEFAULT_RUNTIME_MODE;
      settings.set(sessionId, { sandbox: sandbox ?? "workspace-write", runtimeMode: mode, tools: tools ?? [] });
      const version = conns.get(lease.channel)?.version ?? "0.171.0";
      return {
        sessionId,
        capabilities: codexCapabilities(version, mode.interaction),
        hostGeneration: lease.generation,
      };
    },
    async ensureProviderThread({ sessionId, cwd, resume }) {
      const opening = threadSettings(sessionId, cwd);
      if (!resume) {
        const started = await channelOf(sessionId).send("thread/start", { ...opening, ...dynamicToolsOf(sessionId) });
        return adopt(sessionId, started);
      }
      try {
        const params = { threadId: resume.cursor, excludeTurns: true, ...opening };
        return adopt(sessionId, await channelOf(sessionId).send("thread/resume", params));
      } catch (error) {
        // Only a refusal (no rollout for that thread) means it cannot be resumed; anything else may pass.
        if ((error as { rpcCode?: number }).rpcCode !== INVALID_REQUEST) throw error;
        throw new ResumeFailedError(
          `codex could not resume thread ${resume.cursor}: ${error instanceof Error ? error.message : String(error)}`,
          { cursor: resume.cursor },
        );
      }
    },
    async sendRun({ sessionId, thread, text, context, model, runtimeMode }) {
      const session = sessionSettings(sessionId);
      // Codex's record depends on the mode, so a session never switches: a turn in another mode is a runtime bug.
      if (runtimeMode && !sameRuntimeMode(runtimeMode, session.runtimeMode))
        throw new ProviderError(
          `codex session ${sessionId} works in ${describeMode(session.runtimeMode)}; ` +
            `a turn in ${describeMode(runtimeMode)} needs a session of its own`,
        );
      const tuning = tunings.get(thread.resumeCursor);
      if (!tuning) throw new ProviderError(`codex thread ${thread.resumeCursor} was not opened by this adapter`);
      // Every turn names its thread's cwd (the app-server's own directory is the embedder's) and its session's
      // approval policy and collaboration mode: Codex keeps a thread's last ones, across resumes (a resume of
      // a thread this app-server has loaded changes neither), and sessions of other modes share the app-server.
      const { turn } = await channelOf(sessionId).send("turn/start", {
        threadId: thread.resumeCursor,
        cwd: thread.cwd,
        input: turnInput(text, context),
        ...(model ? { model } : {}),
        approvalPolicy: await approvalPolicyOf(sessionId, thread.cwd),
        ...collaborationMode(session.runtimeMode.interaction, { ...tuning, ...(model ? { model } : {}) }),
      });
      // A model named for a turn stays the thread's model for the turns after it.
      if (model) tuning.model = model;
      return { turnRef: turn.id };
    },
    async steerRun({ sessionId, thread, turnRef, text }) {
      if (!turnRef) throw new ProviderError("codex steers a turn by its id, and this turn has none yet");
      await channelOf(sessionId).send("turn/steer", {
        threadId: thread.resumeCursor,
        expectedTurnId: turnRef,
        input: steerInput(text),
      });
    },
    async interrupt({ sessionId, thread, turnRef }) {
      if (!turnRef) throw new ProviderError("codex interrupts a turn by its id, and this turn has none yet");
      await channelOf(sessionId).send("turn/interrupt", { threadId: thread.resumeCursor, turnId: turnRef });
    },
    // Codex says itself whether a turn still runs: its thread's turn is `inProgress` until it ends.
    async isTurnAlive({ sessionId, thread, turnRef }) {
      const turns = await readTurns(sessionId, thread.resumeCursor);
      const turn = turnRef ? turns.find((t) => t.id === turnRef) : turns.at(-1);
      return turn?.status === "inProgress";
    },
    async respondToRequest({ request, response }) {
      const waiting = request.requestRef ? pending.get(request.requestRef) : undefined;
      if (!waiting) throw new HostUnavailableError(`codex request ${request.requestRef ?? "?"} is no longer pending`);
      waiting.channel.answer(waiting.id, nativeResponse(waiting.method, response));
    },
    async readThreadSnapshot({ sessionId, thread }) {
      return snapshotOf(thread.resumeCursor, await readTurns(sessionId, thread.resumeCursor));
    },
    async rollbackThread({ sessionId, thread, turns }) {
      if (turns <= 0) return;
      const all = await readTurns(sessionId, thread.resumeCursor);
      const first = all[all.length - turns];
      // Never report a rollback that did not happen: the runtime then marks the thread divergent.
      if (!first)
        throw new ProviderError(`codex thread ${thread.resumeCursor} has ${all.length} turns; cannot drop ${turns}`);
      await channelOf(sessionId).send("thread/revert", { threadId: thread.resumeCursor, beforeTurnId: first.id });
    },
    async forkThread({ sessionId, thread, cwd, afterTurnRef }) {
      // The fork's own settings, as for a new thread: its cwd, the session's sandbox and approval policy.
      const params = {
        threadId: thread.resumeCursor,
        excludeTurns: true,
        ...threadSettings(sessionId, cwd),
        ...(afterTurnRef ? { lastTurnId: afterTurnRef } : {}),
      };
      return adopt(sessionId, await channelOf(sessionId).send("thread/fork", params));
    },
  };

  function sessionSettings(sessionId: string) {
    const found = settings.get(sessionId);
    if (!found) throw new HostUnavailableError(`codex session ${sessionId} is not running`, { sessionId });
    return found;
  }

  /**
   * The approval policy of a session's turns: `never` where its mode never asks, else the configured one.
   * A thread once run under `never` would keep it (see sendRun): without the option, Codex's own
   * configured policy is read and restated.
   */
  async function approvalPolicyOf(sessionId: string, cwd: string): Promise<AskForApproval> {
    if (sessionSettings(sessionId).runtimeMode.approvals === "never") return "never";
    if (options.approvalPolicy) return options.approvalPolicy;
    const { config } = await channelOf(sessionId).send("config/read", { cwd });
    return config.approval_policy ?? CODEX_DEFAULT_APPROVAL_POLICY;
  }

  /**
   * What a thread runs under, wherever it is opened (start, resume, fork); the update_plan tool is offered.
   * The approval policy is each turn's (see sendRun).
   */
  const threadSettings = (sessionId: string, cwd: string) => threadOpening(cwd, sessionSettings(sessionId).sandbox);

  const dynamicToolsOf = (sessionId: string) => dynamicTools(sessionSettings(sessionId).tools);

  /** A thread Codex opened for a session (started, resumed or forked): its events route there. */
  function adopt(sessionId: string, opened: OpenedThread): ProviderThreadHandle {
    const { id } = opened.thread;
    threadSessions.set(id, sessionId);
    tunings.set(id, { model: opened.model, effort: opened.reasoningEffort ?? null });
    return { threadRef: id, resumeCursor: id };
  }

  async function readTurns(sessionId: string, threadId: string) {
    const { thread } = await channelOf(sessionId).send("thread/read", { threadId, includeTurns: true });
    return thread.turns;
  }
  return defineAdapter(adapter);
}

/** What `thread/start`, `thread/resume` and `thread/fork` answer alike. */
type OpenedThread = Pick<ThreadStartResponse, "thread" | "model" | "reasoningEffort">;

function describeMode({ interaction, approvals }: RuntimeMode): string {
  return `${interaction} mode with approvals ${approvals}`;
}
