import { createHash } from "node:crypto";
import type { SupervisorPolicy } from "../../machines/hostSupervisor.js";
import { StdioChannel } from "../kit/stdioChannel.js";
import type { SpawnedHost } from "../kit/hostSpec.js";
import { nodeHostScript } from "../kit/hostScript.js";
import type { HostSpec } from "../kit/hostSpec.js";
import { HostSessions } from "../kit/hostSessions.js";
import type { FrameRing } from "../kit/ring.js";
import { DEFAULT_RUNTIME_MODE, type RuntimeMode } from "../../domain/entities.js";
import type { ProviderAdapter, ProviderAdapterEvent, ProviderEvent, SandboxPolicy } from "../contract.js";
import { EventQueue } from "../kit/eventQueue.js";
import { claudeCapabilities } from "./capabilities.js";

/**
 * Claude Code through the official Agent SDK, in a host process owned by the runtime's
 * supervisor (`host/main.ts`): the sessions of a target share it; each provider thread is an
 * SDK session with streaming input. The SDK ships the Claude Code binary; `executable`
 * overrides it.
 */

export interface ClaudeAdapterOptions {
  /** A Claude Code executable to drive instead of the one the SDK ships. */
  executable?: string;
  /** HOME and CLAUDE_CONFIG_DIR for Claude (tests give temporary ones). Omitted: the user's own. */
  home?: string;
  configDir?: string;
  /**
   * Environment for Claude beyond the host allowlist (src/runtime/hosts/environment.ts):
   * ANTHROPIC_BASE_URL, an API key... The embedder's own environment is not passed on, so a key
   * Claude needs goes here. Hashed into the host key; never logged, never sent over RPC.
   */
  env?: Record<string, string>;
  policy?: Partial<SupervisorPolicy>;
}

export type ClaudeAdapter = ProviderAdapter & {
  readonly hostSpec: HostSpec;
  hostPid(sessionId: string): number | null;
};

/** Claude's own opt-outs: no telemetry, no update checks, no traffic beyond the model API. */
const QUIET = {
  DISABLE_TELEMETRY: "1",
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_AUTOUPDATER: "1",
  DISABLE_ERROR_REPORTING: "1",
};

/**
 * Not overridable: no background tasks (agents and shells). A background task's end makes
 * Claude start a turn of its own, which, with no turn ids, would pass for the next run's.
 */
const NO_BACKGROUND = { CLAUDE_CODE_DISABLE_BACKGROUND_TASKS: "1" };

export function createClaudeAdapter(options: ClaudeAdapterOptions = {}): ClaudeAdapter {
  const caps = claudeCapabilities();
  const queue = new EventQueue<ProviderAdapterEvent>();
  /**
   * Each session's sandbox policy and the mode it started in: its threads open under them (the host maps them to
   * Claude's permission mode); each turn then names its own mode.
   */
  const settings = new Map<string, { sandbox: SandboxPolicy; runtimeMode: RuntimeMode }>();
  const settingsOf = (sessionId: string) =>
    settings.get(sessionId) ?? { sandbox: "workspace-write", runtimeMode: DEFAULT_RUNTIME_MODE };
  const sessions = new HostSessions("claude", (sessionId, report) =>
    queue.push({ sessionId, event: { type: "session.state", state: "error", message: `claude host lost: ${report}` } }),
  );
  // Set at spawn and read by the host from its own environment, never sent in a call: a frame
  // ring's dump of the init call would otherwise put the key in the log.
  const claudeEnv: Record<string, string> = {
    ...QUIET,
    ...(options.home ? { HOME: options.home } : {}),
    ...(options.configDir ? { CLAUDE_CONFIG_DIR: options.configDir } : {}),
    ...options.env,
    ...NO_BACKGROUND,
  };
  const { script, execArgs } = nodeHostScript("./host/main.js", import.meta.url);

  const connect = async (host: SpawnedHost, ring: FrameRing): Promise<StdioChannel> => {
    const channel = new StdioChannel(host.child, ring);
    channel.expectNotifications(["host.ready", "event"]);
    // A host that breaks before it is ready (an over-long line...) fails the start at once, not at the startup timeout.
    const ready = channel.nextNotification("host.ready");
    channel.onNotification((method, params) => {
      if (method !== "event") return;
      const { sessionId, event } = (params ?? {}) as { sessionId?: unknown; event?: ProviderEvent };
      if (typeof sessionId === "string" && sessions.find(sessionId))
        queue.push({ sessionId, event: event as ProviderEvent });
    });
    await ready;
    await channel.call("init", options.executable ? { executable: options.executable } : {});
    return channel;
  };

  const spec: HostSpec = {
    target: "claude",
    identity: {
      executable: options.executable ?? script,
      config: { home: options.home ?? null, configDir: options.configDir ?? null },
      credentials: createHash("sha256")
        .update(JSON.stringify(options.env ?? {}))
        .digest("hex"),
    },
    // The host reads Claude's session store too (resume checks): it runs in Claude's environment,
    // and Claude inherits the host's. A user's relocated Claude config directory is inherited.
    spawn: { command: process.execPath, args: [...execArgs, script], env: claudeEnv, inherit: ["CLAUDE_CONFIG_DIR"] },
    connect,
    ...(options.policy ? { policy: options.policy } : {}),
    secrets: Object.values(options.env ?? {}).filter((v) => v.length >= 8),
  };

  const call = async <T>(sessionId: string, method: string, params: unknown): Promise<T> =>
    (await sessions.lease(sessionId).channel.call(method, params)) as T;

  const adapter: ClaudeAdapter = {
    provider: "claude",
    getCapabilities: () => caps,
    bindHosts(registry, target) {
      sessions.bind(registry);
      spec.target = target;
    },
    async startSession({ sessionId, sandbox, runtimeMode }) {
      const held = await sessions.open(sessionId, spec);
      settings.set(sessionId, {
        sandbox: sandbox ?? "workspace-write",
        runtimeMode: runtimeMode ?? DEFAULT_RUNTIME_MODE,
      });
      return { sessionId, capabilities: caps, hostGeneration: held.generation };
    },
    async stopSession({ sessionId }) {
      const held = sessions.take(sessionId);
      settings.delete(sessionId);
      if (!held) return;
      await held.channel.call("closeThreads", { sessionId }, { timeoutMs: 2_000 }).catch(() => undefined);
      held.release();
    },
    async ensureProviderThread({ sessionId, cwd, resume }) {
      const { cursor } = await call<{ cursor: string }>(sessionId, "openThread", {
        sessionId,
        cwd,
        model: null,
        ...settingsOf(sessionId),
        ...(resume ? { resume: resume.cursor } : {}),
      });
      return { threadRef: cursor, resumeCursor: cursor };
    },
    async sendRun({ sessionId, thread, text, context, model, runtimeMode }) {
      const full = context
        ? `Context from earlier in this conversation (${context.kind}):\n${context.text}\n\n${text}`
        : text;
      await call(sessionId, "send", {
        cursor: thread.resumeCursor,
        text: full,
        model,
        runtimeMode: runtimeMode ?? DEFAULT_RUNTIME_MODE,
      });
      return { turnRef: null };
    },
    async interrupt({ sessionId, thread }) {
      await call(sessionId, "interrupt", { cursor: thread.resumeCursor });
    },
    // Claude may work for long without a word (a long Bash streams no output): its host knows whether the prompt still
    // owes a result.
    async isTurnAlive({ sessionId, thread }) {
      return (await call<{ alive: boolean }>(sessionId, "turnAlive", { cursor: thread.resumeCursor })).alive;
    },
    async respondToRequest({ sessionId, request, response }) {
      if (response.kind === "answers")
        return void (await call(sessionId, "respond", {
          requestRef: request.requestRef,
          allow: true,
          answers: response.answers,
        }));
      // Claude calls no embedder tools back (its record says so): a tool result is no permission.
      const allow =
        response.kind === "decision" && (response.decision === "accept" || response.decision === "accept_for_session");
      await call(sessionId, "respond", { requestRef: request.requestRef, allow });
    },
    async rollbackThread({ sessionId, thread, turns }) {
      const { cursor } = await call<{ cursor: string }>(sessionId, "rollback", { cursor: thread.resumeCursor, turns });
      return { handle: { threadRef: cursor, resumeCursor: cursor } };
    },
    async forkThread({ sessionId, thread, cwd }) {
      const { cursor } = await call<{ cursor: string }>(sessionId, "openThread", {
        sessionId,
        cwd,
        model: null,
        ...settingsOf(sessionId),
        fork: thread.resumeCursor,
      });
      return { threadRef: cursor, resumeCursor: cursor };
    },
    streamEvents: () => queue,
    async close() {
      for (const [sessionId] of sessions.entries()) await adapter.stopSession({ sessionId });
      queue.close();
    },
    hostSpec: spec,
    hostPid: (sessionId) => sessions.pid(sessionId),
  };
  return adapter;
}
