import type { SupervisorPolicy } from "../../machines/hostSupervisor.js";
import type { HostSpec } from "../kit/hostSpec.js";
import { hosted } from "../kit/hosted.js";
import { DEFAULT_RUNTIME_MODE, type RuntimeMode } from "../../domain/entities.js";
import { ProviderError } from "../../domain/errors.js";
import type { SandboxPolicy } from "../contract.js";
import { claudeCapabilities, type ClaudeCapabilities } from "./capabilities.js";
import { callHost, claudeHostSpec, type ClaudeHostOptions, type HostMethod, type HostParams } from "./transport.js";
import { userPrompt } from "../kit/context.js";
import { defineAdapter, type AdapterDeclaring } from "../kit/defineAdapter.js";

/**
 * Claude Code through the official Agent SDK, in a host process owned by the runtime's
 * supervisor (`host/main.ts`, reached through `transport.ts`): the sessions of a target share it; each provider
 * thread is an SDK session with streaming input. The SDK ships the Claude Code binary; `executable` overrides it;
 * `model` points it at any Anthropic-compatible endpoint.
 */

export interface ClaudeAdapterOptions extends ClaudeHostOptions {
  policy?: Partial<SupervisorPolicy>;
}

export type { ClaudeModelEndpoint } from "./transport.js";

/** Its record typed as declared: it serves what the record claims (rollback, fork). */
export type ClaudeAdapter = AdapterDeclaring<ClaudeCapabilities> & {
  readonly hostSpec: HostSpec;
  hostPid(sessionId: string): number | null;
};

export function createClaudeAdapter(options: ClaudeAdapterOptions = {}): ClaudeAdapter {
  const caps = claudeCapabilities();
  /**
   * Each session's sandbox policy and the mode it started in: its threads open under them (the host maps them to
   * Claude's permission mode); each turn then names its own mode.
   */
  const settings = new Map<string, { sandbox: SandboxPolicy; runtimeMode: RuntimeMode }>();
  const settingsOf = (sessionId: string) =>
    settings.get(sessionId) ?? { sandbox: "workspace-write", runtimeMode: DEFAULT_RUNTIME_MODE };
  const host = hosted("claude", {
    forget: (sessionId) => settings.delete(sessionId),
    goodbye: (sessionId, held) => callHost(held.channel, "closeThreads", { sessionId }, { timeoutMs: 2_000 }),
  });
  const { queue, sessions } = host;
  const spec: HostSpec = {
    ...claudeHostSpec(options, (sessionId, event) => {
      if (sessions.find(sessionId)) queue.push({ sessionId, event });
    }),
    ...(options.policy ? { policy: options.policy } : {}),
  };

  const call = async <M extends HostMethod>(sessionId: string, method: M, params: HostParams<M>) =>
    callHost(sessions.lease(sessionId).channel, method, params);

  const adapter: ClaudeAdapter = {
    ...host.methods(spec),
    provider: "claude",
    getCapabilities: () => caps,
    async startSession({ sessionId, sandbox, runtimeMode }) {
      const held = await sessions.open(sessionId, spec);
      settings.set(sessionId, {
        sandbox: sandbox ?? "workspace-write",
        runtimeMode: runtimeMode ?? DEFAULT_RUNTIME_MODE,
      });
      return { sessionId, capabilities: caps, hostGeneration: held.generation };
    },
    async ensureProviderThread({ sessionId, cwd, resume }) {
      const { cursor } = await call(sessionId, "openThread", {
        sessionId,
        cwd,
        model: null,
        ...settingsOf(sessionId),
        ...(resume ? { resume: resume.cursor } : {}),
      });
      return { threadRef: cursor, resumeCursor: cursor };
    },
    async sendRun({ sessionId, thread, text, context, model, runtimeMode }) {
      const full = userPrompt(context, text, "claude");
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
      return (await call(sessionId, "turnAlive", { cursor: thread.resumeCursor })).alive;
    },
    async respondToRequest({ sessionId, request, response }) {
      // The host names every permission prompt it opens (by its tool use, else a uuid of its own).
      if (request.requestRef === null) throw new ProviderError("claude: a request without a requestRef");
      const { requestRef } = request;
      if (response.kind === "answers")
        return void (await call(sessionId, "respond", {
          requestRef,
          allow: true,
          answers: response.answers,
        }));
      // Claude calls no embedder tools back (its record says so): a tool result is no permission.
      const allow =
        response.kind === "decision" && (response.decision === "accept" || response.decision === "accept_for_session");
      await call(sessionId, "respond", { requestRef, allow });
    },
    async rollbackThread({ sessionId, thread, turns }) {
      const { cursor } = await call(sessionId, "rollback", { cursor: thread.resumeCursor, turns });
      return { handle: { threadRef: cursor, resumeCursor: cursor } };
    },
    async forkThread({ sessionId, thread, cwd }) {
      const { cursor } = await call(sessionId, "openThread", {
        sessionId,
        cwd,
        model: null,
        ...settingsOf(sessionId),
        fork: thread.resumeCursor,
      });
      return { threadRef: cursor, resumeCursor: cursor };
    },
  };
  return defineAdapter(adapter);
}
