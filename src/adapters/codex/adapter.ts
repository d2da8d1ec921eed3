import { createHash } from "node:crypto";
import type { ProviderCapabilities } from "../../capabilities/index.js";
import { DEFAULT_RUNTIME_MODE, sameRuntimeMode, type RuntimeMode } from "../../domain/entities.js";
import { HostUnavailableError, ProviderError, ResumeFailedError } from "../../domain/errors.js";
import { INVALID_REQUEST } from "../kit/jsonRpc.js";
import type { SupervisorPolicy } from "../../machines/hostSupervisor.js";
import type { SpawnedHost } from "../kit/hostSpec.js";
import type { HostSpec } from "../kit/hostSpec.js";
import { HostSessions } from "../kit/hostSessions.js";
import type { FrameRing } from "../kit/ring.js";
import type {
  DynamicToolDefinition,
  ProviderAdapter,
  ProviderAdapterEvent,
  ProviderEvent,
  ProviderThreadHandle,
  SandboxPolicy,
} from "../contract.js";
import { EventQueue } from "../kit/eventQueue.js";
import { codexCapabilities, codexVersion } from "./capabilities.js";
import { resolveCodexBinary } from "./config.js";
import { mapNotification, mapServerRequest, nativeResponse } from "./mapper.js";
import { collaborationModeParams, UPDATE_PLAN_TOOL, type ThreadTuning } from "./modes.js";
import { CODEX_SERVER_NOTIFICATIONS } from "./protocol/notifications.js";
import { CodexChannel } from "./transport.js";

/**
 * Codex through `codex app-server` (JSON-RPC on stdio), in a host process owned by the
 * runtime's supervisor: the sessions of a target share one app-server; each session is a
 * lease plus the threads it opened. The capability record comes from the handshake and the
 * session's runtime mode: Codex's planning differs by collaboration mode (modes.ts), so a session
 * works in the one mode it started in (`supportsRuntimeModeSwitchInSession: false`), and
 * sessions of different modes share the app-server (every turn names its mode and policy).
 */

export interface CodexAdapterOptions {
  /** The codex binary; default: `codex` on PATH, else the installed @openai/codex package. */
  binary?: string;
  /** CODEX_HOME for the app-server. Omitted: Codex's own home (read by Codex, never written by Tiller). */
  codexHome?: string;
  /** HOME for the app-server (tests give a temporary one). */
  home?: string;
  /**
   * Environment for the app-server beyond the host allowlist (src/runtime/hosts/environment.ts):
   * an API key variable... The embedder's own environment is not passed on, so a key Codex
   * needs goes here. Hashed into the host key; never logged, never sent over RPC.
   */
  env?: Record<string, string>;
  /**
   * The approval policy of sessions whose runtime mode asks before acting (`approvals: "on_request"`);
   * omitted: Codex's configured one. A session that never asks runs under `never`.
   */
  approvalPolicy?: "untrusted" | "on-request" | "on-failure" | "never";
  /** Host lifecycle (startup timeout, idle TTL, restart budget). */
  policy?: Partial<SupervisorPolicy>;
  /** Sees every raw frame to and from the app-server (the transcript recorder); unredacted, so never logged. */
  tap?: (direction: "in" | "out", line: string) => void;
}

/** What Codex runs a thread under when its config names no approval policy (measured on the pinned binary). */
const CODEX_DEFAULT_APPROVAL_POLICY = "on-request";

const SANDBOX: Record<SandboxPolicy, string> = {
  "read-only": "read-only",
  "workspace-write": "workspace-write",
  "full-access": "danger-full-access",
};

interface Conn {
  /** The binary's version, from the handshake: the record of each session's mode is that version's. */
  version: string;
  /** Prefixes this app-server's request ids (they restart at 0 in every process). */
  serial: number;
}

export type CodexAdapter = ProviderAdapter & { readonly hostSpec: HostSpec; hostPid(sessionId: string): number | null };

export function createCodexAdapter(options: CodexAdapterOptions = {}): CodexAdapter {
  const binary = resolveCodexBinary(options.binary);
  const queue = new EventQueue<ProviderAdapterEvent>();
  const sessions = new HostSessions("codex", (sessionId, report) =>
    queue.push({
      sessionId,
      event: { type: "session.state", state: "error", message: `codex app-server lost: ${report}` },
    }),
  );
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
  const pending = new Map<string, { channel: CodexChannel; id: number; method: string }>();
  /** Threads of stopped sessions: their late events belong to no session. */
  const retired = new Set<string>();
  let serials = 0;
  /** Each native thread's model and effort, which every turn's collaboration mode restates. */
  const tunings = new Map<string, ThreadTuning>();
  /** File changes by item id: a file-change approval names only the item. */
  const fileChanges = new Map<string, { path: string; diff: string }>();
  let declared: ProviderCapabilities | null = null;

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

  const connect = async (host: SpawnedHost, ring: FrameRing): Promise<CodexChannel> => {
    const channel = new CodexChannel(host.child, ring);
    channel.tap = options.tap ?? null;
    channel.expectNotifications(CODEX_SERVER_NOTIFICATIONS);
    const serial = ++serials;
    channel.onFailed(() => {
      for (const [ref, entry] of pending) if (entry.channel === channel) pending.delete(ref);
    });
    channel.onNotification((method, params) => {
      for (const mapped of mapNotification(method, params)) {
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
    });
    channel.onRequest((method, params, id) => {
      const native = mapServerRequest(method, params, id, fileChanges);
      const opened = native && { ...native, requestRef: `${serial}:${id}` };
      if (!opened) {
        // Not projected: refused at once so the turn is never stuck on it; said in the log.
        channel.respondError(id, `${method} is not supported by this client`);
        const at = (params ?? {}) as { threadId?: string };
        emit(channel, {
          type: "warning",
          ...(at.threadId ? { threadRef: at.threadId } : {}),
          message: `codex request ${method} is not supported by this adapter; declined`,
        });
        return;
      }
      pending.set(opened.requestRef!, { channel, id, method });
      emit(channel, opened);
    });
    // The experimental API: a turn's collaboration mode is an experimental field.
    const init = (await channel.call("initialize", {
      clientInfo: { name: "tiller", title: null, version: "0.1.0" },
      capabilities: { experimentalApi: true },
    })) as { userAgent?: string };
    const version = codexVersion(init.userAgent ?? "");
    // Checked here, so an unsupported binary fails the connection rather than a later session.
    const capabilities = codexCapabilities(version);
    channel.notify("initialized");
    conns.set(channel, { version, serial });
    declared ??= capabilities;
    return channel;
  };

  // On top of the allowlist (locale, TMPDIR, proxies): the provider home and the embedder's variables.
  const env: Record<string, string> = {
    ...(options.home ? { HOME: options.home } : {}),
    ...(options.codexHome ? { CODEX_HOME: options.codexHome } : {}),
    ...options.env,
  };
  const spec: HostSpec = {
    target: "codex",
    // Credentials only as a digest: the spec is reachable from the adapter.
    identity: {
      executable: binary,
      config: { codexHome: options.codexHome ?? null, home: options.home ?? null },
      credentials: digest(JSON.stringify(options.env ?? {})),
    },
    // A user's relocated Codex home (where `codex login` put the credentials) is inherited.
    spawn: { command: binary, args: ["app-server"], env, inherit: ["CODEX_HOME"] },
    connect,
    ...(options.policy ? { policy: options.policy } : {}),
    secrets: Object.values(options.env ?? {}),
  };

  const call = async <T>(sessionId: string, method: string, params: unknown): Promise<T> =>
    (await sessions.lease(sessionId).channel.call(method, params)) as T;
  const textInput = (text: string) => ({ type: "text", text, text_elements: [] });

  const adapter: CodexAdapter = {
    provider: "codex",
    // The Default-mode record (before a handshake, the supported version's); each session announces its own mode's.
    getCapabilities: () => declared ?? codexCapabilities("0.171.0"),
    bindHosts(registry, target) {
      sessions.bind(registry);
      spec.target = target;
    },
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
    async stopSession({ sessionId }) {
      const lease = sessions.take(sessionId);
      settings.delete(sessionId);
      if (!lease) return;
      const owned = [...threadSessions].filter(([, owner]) => owner === sessionId).map(([thread]) => thread);
      for (const thread of owned) {
        threadSessions.delete(thread);
        tunings.delete(thread);
        retired.add(thread);
        // Best effort: the app-server stops sending this thread's events to us.
        await lease.channel
          .call("thread/unsubscribe", { threadId: thread }, { timeoutMs: 2_000 })
          .catch(() => undefined);
      }
      lease.release();
    },
    async ensureProviderThread({ sessionId, cwd, resume }) {
      sessions.lease(sessionId);
      const opening = threadSettings(sessionId, cwd);
      let opened: OpenedThread;
      if (resume) {
        try {
          opened = await call<OpenedThread>(sessionId, "thread/resume", {
            threadId: resume.cursor,
            excludeTurns: true,
            ...opening,
          });
        } catch (error) {
          // Only a refusal (no rollout for that thread) means it cannot be resumed; anything else may pass.
          if ((error as { rpcCode?: number }).rpcCode !== INVALID_REQUEST) throw error;
          throw new ResumeFailedError(
            `codex could not resume thread ${resume.cursor}: ${error instanceof Error ? error.message : String(error)}`,
            { cursor: resume.cursor },
          );
        }
      } else {
        opened = await call<OpenedThread>(sessionId, "thread/start", { ...opening, ...dynamicToolsOf(sessionId) });
      }
      return adopt(sessionId, opened);
    },
    async sendRun({ sessionId, thread, text, context, model, runtimeMode }) {
      const session = sessionSettings(sessionId);
      // Codex's record depends on the mode, so a session never switches: a turn in another mode is a runtime bug.
      if (runtimeMode && !sameRuntimeMode(runtimeMode, session.runtimeMode))
        throw new ProviderError(
          `codex session ${sessionId} works in ${describeMode(session.runtimeMode)}; ` +
            `a turn in ${describeMode(runtimeMode)} needs a session of its own`,
        );
      // Codex takes developer instructions only when a thread starts: a handoff goes in as user context.
      const input = [
        ...(context
          ? [textInput(`Context from earlier in this conversation (${context.kind}):\n${context.text}`)]
          : []),
        textInput(text),
      ];
      const tuning = tunings.get(thread.resumeCursor);
      if (!tuning) throw new ProviderError(`codex thread ${thread.resumeCursor} was not opened by this adapter`);
      // Every turn names its thread's cwd (the app-server's own directory is the embedder's) and its session's
      // approval policy and collaboration mode: Codex keeps a thread's last ones, across resumes (a resume of
      // a thread this app-server has loaded changes neither), and sessions of other modes share the app-server.
      const { turn } = await call<{ turn: { id: string } }>(sessionId, "turn/start", {
        threadId: thread.resumeCursor,
        cwd: thread.cwd,
        input,
        ...(model ? { model } : {}),
        approvalPolicy: await approvalPolicyOf(sessionId, thread.cwd),
        ...collaborationModeParams(session.runtimeMode.interaction, { ...tuning, ...(model ? { model } : {}) }),
      });
      // A model named for a turn stays the thread's model for the turns after it.
      if (model) tuning.model = model;
      return { turnRef: turn.id };
    },
    async steerRun({ sessionId, thread, turnRef, text }) {
      if (!turnRef) throw new ProviderError("codex steers a turn by its id, and this turn has none yet");
      await call(sessionId, "turn/steer", {
        threadId: thread.resumeCursor,
        expectedTurnId: turnRef,
        input: [textInput(text)],
      });
    },
    async interrupt({ sessionId, thread, turnRef }) {
      if (!turnRef) throw new ProviderError("codex interrupts a turn by its id, and this turn has none yet");
      await call(sessionId, "turn/interrupt", { threadId: thread.resumeCursor, turnId: turnRef });
    },
    // Codex says itself whether a turn still runs: its thread's turn is `inProgress` until it ends.
    async isTurnAlive({ sessionId, thread, turnRef }) {
      const turns = await readTurns(sessionId, thread);
      const turn = turnRef ? turns.find((t) => t.id === turnRef) : turns.at(-1);
      return turn?.status === "inProgress";
    },
    async respondToRequest({ request, response }) {
      const waiting = request.requestRef ? pending.get(request.requestRef) : undefined;
      if (!waiting) throw new HostUnavailableError(`codex request ${request.requestRef ?? "?"} is no longer pending`);
      waiting.channel.respond(waiting.id, nativeResponse(waiting.method, response));
    },
    async readThreadSnapshot({ sessionId, thread }) {
      const turns = await readTurns(sessionId, thread);
      return {
        threadRef: thread.resumeCursor,
        turns: turns.map((t) => ({
          turnRef: t.id,
          status:
            t.status === "inProgress"
              ? "running"
              : t.status === "interrupted"
                ? "interrupted"
                : t.status === "failed"
                  ? "failed"
                  : "completed",
          userText: itemsText(t.items, "userMessage"),
          assistantText: itemsText(t.items, "agentMessage"),
        })),
      };
    },
    async rollbackThread({ sessionId, thread, turns }) {
      if (turns <= 0) return;
      const all = await readTurns(sessionId, thread);
      const first = all[all.length - turns];
      // Never report a rollback that did not happen: the runtime then marks the thread divergent.
      if (!first)
        throw new ProviderError(`codex thread ${thread.resumeCursor} has ${all.length} turns; cannot drop ${turns}`);
      await call(sessionId, "thread/revert", { threadId: thread.resumeCursor, beforeTurnId: first.id });
    },
    async forkThread({ sessionId, thread, cwd, afterTurnRef }) {
      // The fork's own settings, as for a new thread: its cwd, the session's sandbox and approval policy.
      const params = {
        threadId: thread.resumeCursor,
        excludeTurns: true,
        ...threadSettings(sessionId, cwd),
        ...(afterTurnRef ? { lastTurnId: afterTurnRef } : {}),
      };
      return adopt(sessionId, await call<OpenedThread>(sessionId, "thread/fork", params));
    },
    streamEvents: () => queue,
    async close() {
      for (const [sessionId] of sessions.entries()) await adapter.stopSession({ sessionId });
      queue.close();
    },
    hostSpec: spec,
    hostPid: (sessionId) => sessions.pid(sessionId),
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
  async function approvalPolicyOf(sessionId: string, cwd: string): Promise<unknown> {
    if (sessionSettings(sessionId).runtimeMode.approvals === "never") return "never";
    if (options.approvalPolicy) return options.approvalPolicy;
    const { config } = await call<{ config: { approval_policy?: unknown } }>(sessionId, "config/read", { cwd });
    return config.approval_policy ?? CODEX_DEFAULT_APPROVAL_POLICY;
  }

  /**
   * What a thread runs under, wherever it is opened (start, resume, fork); the update_plan tool is offered.
   * The approval policy is each turn's (see sendRun).
   */
  function threadSettings(sessionId: string, cwd: string) {
    return { cwd, sandbox: SANDBOX[sessionSettings(sessionId).sandbox], config: UPDATE_PLAN_TOOL };
  }

  /**
   * The embedder's tools as Codex's dynamic tools (experimental: `thread/start` takes them, resume and fork do not;
   * a call comes back as an `item/tool/call` request, answered through the runtime).
   */
  function dynamicToolsOf(sessionId: string) {
    const { tools } = sessionSettings(sessionId);
    if (tools.length === 0) return {};
    return {
      dynamicTools: tools.map((t) => ({
        type: "function",
        name: t.name,
        description: t.description,
        inputSchema: t.inputSchema,
      })),
    };
  }

  /** A thread Codex opened for a session (started, resumed or forked): its events route there. */
  function adopt(sessionId: string, opened: OpenedThread): ProviderThreadHandle {
    const { id } = opened.thread;
    threadSessions.set(id, sessionId);
    tunings.set(id, { model: opened.model, effort: opened.reasoningEffort ?? null });
    return { threadRef: id, resumeCursor: id };
  }

  type NativeTurn = { id: string; status: string; items: Array<Record<string, unknown>> };
  async function readTurns(sessionId: string, thread: ProviderThreadHandle): Promise<NativeTurn[]> {
    const { thread: read } = await call<{ thread: { turns?: NativeTurn[] } }>(sessionId, "thread/read", {
      threadId: thread.resumeCursor,
      includeTurns: true,
    });
    return read.turns ?? [];
  }
  return adapter;
}

/** What `thread/start`, `thread/resume` and `thread/fork` answer (the part the adapter reads). */
type OpenedThread = { thread: { id: string }; model: string; reasoningEffort?: string | null };

function describeMode({ interaction, approvals }: RuntimeMode): string {
  return `${interaction} mode with approvals ${approvals}`;
}

function digest(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

function itemsText(items: Array<Record<string, unknown>>, type: string): string {
  return items
    .filter((i) => i.type === type)
    .map((i) =>
      typeof i.text === "string"
        ? i.text
        : Array.isArray(i.content)
          ? (i.content as Array<{ text?: string }>).map((c) => c.text ?? "").join("")
          : "",
    )
    .join("\n");
}
