import { client, methods } from "@agentclientprotocol/sdk/unstable";
import {
  CapabilityUnsupportedError,
  HostUnavailableError,
  InvalidInputError,
  ProtocolError,
  ProviderError,
  ResumeFailedError,
} from "../../domain/errors.js";
import type { SupervisorPolicy } from "../../machines/hostSupervisor.js";
import type { ProviderAdapter, ProviderEvent, ProviderThreadHandle } from "../contract.js";
import { defineAdapter } from "../kit/defineAdapter.js";
import type { ChannelLimits } from "../kit/frameLimits.js";
import type { HostSpec, SpawnedHost } from "../kit/hostSpec.js";
import { hosted } from "../kit/hosted.js";
import type { FrameRing } from "../kit/ring.js";
import { acpCapabilities, resumeMethod, type AcpBehaviour } from "./capabilities.js";
import {
  mapUpdate,
  newThreadState,
  outcomeOf,
  permissionAnswer,
  permissionRequest,
  promptOf,
  turnEnded,
  turnFailed,
  type AcpThreadState,
} from "./mapper.js";
import type {
  InitializeResponse,
  PermissionOption,
  RequestPermissionRequest,
  RequestPermissionResponse,
  SessionConfigOption,
  SessionNotification,
  SessionUpdate,
} from "./protocol/sdk.js";
import type { RawOutputFields } from "./tools.js";
import { AcpChannel, agentLaunch, bounded, checkedNotification, type AcpAgentCommand } from "./transport.js";

/**
 * Any Agent Client Protocol agent (Gemini CLI, claude-agent-acp, codex-acp...), driven over stdio through the ACP
 * SDK's typed client, in a host process owned by the runtime's supervisor: the sessions of a target share one agent
 * process; each provider session is a lease plus the ACP sessions it opened, one per provider thread. The capability
 * record is negotiated from the agent's `initialize` answer (capabilities.ts); the adapter is generic: what one agent
 * needs that another does not is in the target's options (`behaviour`, `authMethod`, `beforeLoad`), and each known
 * agent's are in agents.ts.
 */

export interface AcpAdapterOptions {
  /** The agent: its command line and environment. */
  agent: AcpAgentCommand;
  /** Calls `authenticate` with this method after `initialize` (it must be one the agent advertises). */
  authMethod?: string;
  /** What the agent does that its handshake does not say (capabilities.ts). */
  behaviour?: AcpBehaviour;
  /**
   * Runs before a thread is loaded into a new agent process (`session/load`), for an agent whose load needs its files
   * arranged first (a documented quirk: see agents.ts).
   */
  beforeLoad?(input: { threadRef: string; cwd: string }): Promise<void>;
  /**
   * For an agent that replays a loaded session's history after its `session/load` reply (ACP has it before): the
   * update that follows the replay. The load completes when it arrives, and what comes before is dropped as history.
   */
  replayEndsWith?: SessionUpdate["sessionUpdate"];
  /**
   * For an agent that shows a tool's output in no content block: the fields of its `rawOutput` that hold the output's
   * text and a command's exit code (ACP leaves the raw output's shape to the agent).
   */
  rawOutput?: RawOutputFields;
  /** Host lifecycle (startup timeout, idle TTL, restart budget). */
  policy?: Partial<SupervisorPolicy>;
  /** Caps on what the agent may send at once. */
  limits?: ChannelLimits;
  /** Sees every raw frame to and from the agent (the transcript recorder); unredacted, so never logged. */
  tap?: (direction: "in" | "out", line: string) => void;
}

/** The client's name and version, as the agent is told at `initialize`. */
const CLIENT_INFO = { name: "tiller", title: "Tiller", version: "0.1.0" };
/** How long the agent gets to answer a call that is not a turn (a turn takes as long as it takes). */
const CALL_TIMEOUT_MS = 60_000;

interface Conn {
  init: InitializeResponse;
  /** Prefixes this agent process's request ids (they restart in every process). */
  serial: number;
}

/** A provider thread: an ACP session, the provider session that opened it, and its turn's state. */
interface Thread {
  sessionId: string;
  channel: AcpChannel;
  cwd: string;
  state: AcpThreadState;
  /** A turn is running: its prompt awaits its response. */
  prompting: boolean;
  /** The running turn was asked to stop (`session/cancel`). */
  cancelAsked: boolean;
  /** The history a load replays after its reply is still coming (`replayEndsWith`): told when it has come. */
  replaying: (() => void) | null;
  /** The session's settings as the agent last said them (its model selector among them, where it has one). */
  configOptions: SessionConfigOption[];
  /** The model this adapter chose for the session (null: the agent's own). */
  model: string | null;
  /** The JSON-RPC ids of the permission requests it was asked (their replies are written before the agent stops). */
  asked: Array<string | number | null>;
}

interface Pending {
  thread: string;
  /** The request's JSON-RPC id, as the agent gave it. */
  id: string | number | null;
  options: PermissionOption[];
  /** Answers the agent; `told` (default): the app stream hears the request resolved. */
  answer(response: RequestPermissionResponse, told?: boolean): void;
}

/** The adapter: the contract's methods, its host spec and its agent processes' pids. */
export type AcpAdapter = ProviderAdapter & { readonly hostSpec: HostSpec; hostPid(sessionId: string): number | null };

export function createAcpAdapter(options: AcpAdapterOptions): AcpAdapter {
  if (!options || typeof options !== "object" || !options.agent)
    throw new InvalidInputError("agent", "must say which agent to run (its command)");
  const launch = agentLaunch(options.agent);
  const host = hosted("acp", {
    // The session's threads are forgotten first (their late updates belong to no session), then closed in the agent.
    forget: (sessionId) => {
      models.delete(sessionId);
      const owned = [...threads].filter(([, t]) => t.sessionId === sessionId).map(([ref]) => ref);
      const answered = owned.flatMap((ref) => threads.get(ref)?.asked ?? []);
      closing.set(sessionId, { owned, answered });
      for (const ref of owned) forgetThread(ref);
    },
    goodbye: async (sessionId, lease) => {
      const { owned, answered } = closing.get(sessionId) ?? { owned: [], answered: [] };
      closing.delete(sessionId);
      const channel = lease.channel as AcpChannel;
      // The requests it was asked are answered (those still waiting, cancelled) before the agent may be stopped.
      await channel.replied(answered, 2_000);
      if (!advertised(conns.get(channel)?.init.agentCapabilities?.sessionCapabilities?.close)) return;
      for (const ref of owned)
        await bounded(
          channel.connection.agent.request(methods.agent.session.close, { sessionId: ref }),
          2_000,
          "session/close",
        ).catch(() => undefined);
    },
  });
  const { sessions, push } = host;
  const conns = new WeakMap<AcpChannel, Conn>();
  /** Provider threads by ACP session id. */
  const threads = new Map<string, Thread>();
  /** The threads of a stopping provider session, to close in the agent (`session/close`, where advertised). */
  const closing = new Map<string, { owned: string[]; answered: Array<string | number | null> }>();
  /** The model each provider session was started with (null: the agent's own). */
  const models = new Map<string, string | null>();
  /** Permission requests waiting for an answer, by `<agent serial>:<JSON-RPC id>`. */
  const pending = new Map<string, Pending>();
  let serials = 0;
  let declared: ReturnType<typeof acpCapabilities> | null = null;

  const emit = (thread: Thread, events: ProviderEvent[]) => {
    for (const event of events) push(thread.sessionId, event);
  };
  const liveThread = (channel: AcpChannel, ref: string): Thread | undefined => {
    const thread = threads.get(ref);
    return thread && thread.channel === channel && sessions.find(thread.sessionId) ? thread : undefined;
  };

  /**
   * The thread is no provider session's any more (stopped, or its agent is gone): the agent's requests still waiting
   * are answered `cancelled`, told to no one (the runtime expires them with the session).
   */
  function forgetThread(ref: string) {
    threads.delete(ref);
    cancelRequests(ref, false);
  }

  /** Answers every permission request of the thread still waiting: `cancelled` (ACP: none is left unanswered). */
  function cancelRequests(ref: string, told = true) {
    for (const waiting of [...pending.values()])
      if (waiting.thread === ref) waiting.answer({ outcome: { outcome: "cancelled" } }, told);
  }

  function onUpdate(channel: AcpChannel, params: SessionNotification) {
    channel.taken();
    const thread = liveThread(channel, params.sessionId);
    if (!thread) return channel.ring.note("unknown_notification", `session/update of session ${params.sessionId}`);
    if (thread.replaying) {
      if (params.update.sessionUpdate === options.replayEndsWith) thread.replaying();
      return;
    }
    if (params.update.sessionUpdate === "config_option_update") thread.configOptions = params.update.configOptions;
    // An update while no prompt runs belongs to no turn (one after the prompt's response is late): not projected.
    if (!thread.prompting) return;
    try {
      emit(thread, mapUpdate(thread.state, { threadRef: params.sessionId }, params.update, options.rawOutput));
    } catch (error) {
      channel.ring.note("listener_error", `session/update ${params.update.sessionUpdate}: ${messageOf(error)}`);
    }
  }

  function onPermission(
    channel: AcpChannel,
    serial: number,
    params: RequestPermissionRequest,
    id: string | number | null,
    signal: AbortSignal,
  ): Promise<RequestPermissionResponse> {
    const thread = liveThread(channel, params.sessionId);
    // A request of no thread this adapter runs (a stopped session's): cancelled, never left waiting.
    if (!thread || !thread.prompting) return Promise.resolve({ outcome: { outcome: "cancelled" } });
    const where = { threadRef: params.sessionId };
    const { events, itemRef, request } = permissionRequest(thread.state, where, params);
    // JSON-RPC ids are typed: 7 and "7" are two requests.
    const requestRef = `${serial}:${JSON.stringify(id)}`;
    // An id the agent already has a request waiting under: that one is no answer's to take; this one is cancelled.
    if (pending.has(requestRef)) {
      channel.ring.note("invalid_params", `session/request_permission: id ${JSON.stringify(id)} is already waiting`);
      return Promise.resolve({ outcome: { outcome: "cancelled" } });
    }
    thread.asked.push(id);
    emit(thread, [...events, { type: "request.opened", ...where, requestRef, itemRef, request }]);
    return new Promise((resolve) => {
      const entry: Pending = {
        thread: params.sessionId,
        id,
        options: params.options,
        answer: (response, told = true) => {
          if (pending.get(requestRef) !== entry) return;
          pending.delete(requestRef);
          resolve(response);
          if (told)
            emit(thread, [
              { type: "request.resolved", ...where, requestRef, outcome: outcomeOf(params.options, response) },
            ]);
        },
      };
      pending.set(requestRef, entry);
      const answer = entry.answer;
      // The agent withdrew it (`$/cancel_request`).
      signal.addEventListener("abort", () => answer({ outcome: { outcome: "cancelled" } }), { once: true });
    });
  }

  const connect = async (spawned: SpawnedHost, ring: FrameRing): Promise<AcpChannel> => {
    const serial = ++serials;
    const holder: { channel?: AcpChannel } = {};
    const app = client({ name: CLIENT_INFO.name })
      // Checked by the channel, as it read them (transport.ts).
      .onNotification(methods.client.session.update, checkedNotification, ({ params }) =>
        onUpdate(holder.channel!, params),
      )
      .onRequest(methods.client.session.requestPermission, ({ params, requestId, signal }) =>
        onPermission(holder.channel!, serial, params, requestId, signal),
      );
    const channel = new AcpChannel(spawned.child, ring, app, options.limits);
    holder.channel = channel;
    channel.tap = options.tap ?? null;
    channel.onFailed(() => {
      for (const [ref, thread] of threads) if (thread.channel === channel) forgetThread(ref);
    });
    const init = await bounded<InitializeResponse>(
      channel.connection.agent.request(methods.agent.initialize, {
        protocolVersion: 1,
        // Neither the client's file system nor its terminals are offered: the agent uses its own (GAP.md).
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: CLIENT_INFO,
      }),
      CALL_TIMEOUT_MS,
      "initialize",
    );
    // Checked before anything else is asked, so an agent of another protocol fails the connection, not a session.
    if (typeof init !== "object" || init === null)
      throw new ProtocolError(`the agent answered initialize with ${JSON.stringify(init)}`, { method: "initialize" });
    const capabilities = acpCapabilities(init, options.behaviour);
    if (options.authMethod) {
      const offered = (init.authMethods ?? []).map((m) => m.id);
      if (!offered.includes(options.authMethod))
        throw new ProviderError(
          `the agent offers no authentication method ${options.authMethod} (it offers ${offered.join(", ") || "none"})`,
        );
      await bounded(
        channel.connection.agent.request(methods.agent.authenticate, { methodId: options.authMethod }),
        CALL_TIMEOUT_MS,
        "authenticate",
      );
    }
    conns.set(channel, { init, serial });
    declared ??= capabilities;
    return channel;
  };

  const spec: HostSpec = {
    target: "acp",
    identity: launch.identity,
    spawn: launch.spawn,
    connect,
    secrets: launch.secrets,
    ...(options.policy ? { policy: options.policy } : {}),
  };

  const channelOf = (sessionId: string) => sessions.lease(sessionId).channel as AcpChannel;
  const connOf = (channel: AcpChannel): Conn => {
    const conn = conns.get(channel);
    if (!conn) throw new HostUnavailableError("the ACP agent's handshake did not complete");
    return conn;
  };
  const threadOf = (sessionId: string, ref: string): Thread => {
    const thread = threads.get(ref);
    if (!thread || thread.sessionId !== sessionId)
      throw new ProviderError(`ACP session ${ref} was not opened by provider session ${sessionId}`);
    return thread;
  };

  /** An ACP session this provider session opened (new, loaded, resumed or forked): its updates route there. */
  function adopt(sessionId: string, channel: AcpChannel, ref: string, cwd: string): ProviderThreadHandle {
    const thread: Thread = {
      sessionId,
      channel,
      cwd,
      state: newThreadState(),
      prompting: false,
      cancelAsked: false,
      replaying: null,
      configOptions: [],
      model: null,
      asked: [],
    };
    threads.set(ref, thread);
    return { threadRef: ref, resumeCursor: ref };
  }

  /** What an opened session said of its settings, and the provider session's model chosen for it. */
  async function opened(
    sessionId: string,
    handle: ProviderThreadHandle,
    answer: { configOptions?: SessionConfigOption[] | null } | void,
  ): Promise<ProviderThreadHandle> {
    const thread = threads.get(handle.resumeCursor)!;
    if (answer?.configOptions) thread.configOptions = answer.configOptions;
    await chooseModel(thread, handle.resumeCursor, models.get(sessionId) ?? null);
    return handle;
  }

  /**
   * Chooses the session's model: through its model selector (a config option of category `model`), else by the
   * earlier ACP drafts' `session/set_model` (which agents such as Gemini CLI still serve). An agent with neither cannot
   * be given a model: a typed refusal, never a turn on another model.
   */
  async function chooseModel(thread: Thread, ref: string, model: string | null): Promise<void> {
    if (!model || thread.model === model) return;
    const agent = thread.channel.connection.agent;
    const selector = thread.configOptions.find((o) => o.category === "model" && o.type === "select");
    try {
      await bounded(
        selector
          ? agent.request(methods.agent.session.setConfigOption, {
              sessionId: ref,
              configId: selector.id,
              value: model,
            })
          : agent.request("session/set_model", { sessionId: ref, modelId: model }),
        CALL_TIMEOUT_MS,
        selector ? "session/set_config_option" : "session/set_model",
      );
    } catch (error) {
      if (error instanceof HostUnavailableError) throw error;
      throw new CapabilityUnsupportedError(
        "sessions.supportsModelSwitchInSession",
        `the agent did not take the model ${model}: ${messageOf(error)}`,
      );
    }
    thread.model = model;
  }

  const hostedMethods = host.methods(spec);
  const adapter: AcpAdapter = {
    ...hostedMethods,
    provider: "acp",
    // The record is the agent's `initialize` answer: the runtime has it negotiated (an agent started, its handshake
    // done) before it reads `getCapabilities()`.
    async negotiate() {
      if (!declared) await hostedMethods.prewarm();
    },
    // The record of the first agent process's handshake (`negotiate`); before any, ACP's least (nothing advertised).
    getCapabilities: () => declared ?? acpCapabilities({ protocolVersion: 1 }, options.behaviour),
    async startSession({ sessionId, model }) {
      const lease = await sessions.open(sessionId, spec);
      models.set(sessionId, model);
      const { init } = connOf(lease.channel as AcpChannel);
      return { sessionId, capabilities: acpCapabilities(init, options.behaviour), hostGeneration: lease.generation };
    },
    async ensureProviderThread({ sessionId, cwd, resume }) {
      const channel = channelOf(sessionId);
      const agent = channel.connection.agent;
      if (!resume) {
        const answer = await bounded(
          agent.request(methods.agent.session.new, { cwd, mcpServers: [] }),
          CALL_TIMEOUT_MS,
          "session/new",
        );
        return opened(sessionId, adopt(sessionId, channel, sessionIdOf(answer, "session/new"), cwd), answer);
      }
      const ref = resume.cursor;
      const how = resumeMethod(connOf(channel).init);
      if (!how)
        throw new ResumeFailedError(`the agent cannot load a session (it advertises neither load nor resume)`, {
          cursor: ref,
        });
      // Already open in this agent process (another provider session's, or this one's): taken over as it is, with
      // the settings the agent said of it.
      const open = threads.get(ref);
      if (open?.channel === channel) {
        const handle = adopt(sessionId, channel, ref, cwd);
        Object.assign(threads.get(ref)!, { configOptions: open.configOptions, model: open.model, asked: open.asked });
        return opened(sessionId, handle, undefined);
      }
      const handle = adopt(sessionId, channel, ref, cwd);
      let answer: { configOptions?: SessionConfigOption[] | null } | void;
      try {
        if (how === "session/resume") {
          answer = await bounded(
            agent.request(methods.agent.session.resume, { sessionId: ref, cwd, mcpServers: [] }),
            CALL_TIMEOUT_MS,
            how,
          );
        } else {
          await options.beforeLoad?.({ threadRef: ref, cwd });
          // The history it replays is dropped (it is no live turn's): by the channel up to the reply (transport.ts),
          // and after it up to the update that ends it, where the agent replays late.
          const thread = threads.get(ref)!;
          const replayed = options.replayEndsWith
            ? new Promise<void>((resolve) => (thread.replaying = resolve))
            : Promise.resolve();
          answer = await bounded(
            agent.request(methods.agent.session.load, { sessionId: ref, cwd, mcpServers: [] }),
            CALL_TIMEOUT_MS,
            how,
          );
          await bounded(replayed, CALL_TIMEOUT_MS, `${how} (its history replayed after the reply)`);
          thread.replaying = null;
        }
      } catch (error) {
        forgetThread(ref);
        if (error instanceof HostUnavailableError) throw error;
        throw new ResumeFailedError(
          `the agent could not ${how === "session/load" ? "load" : "resume"} session ${ref}: ${messageOf(error)}`,
          { cursor: ref },
        );
      }
      return opened(sessionId, handle, answer);
    },
    async sendRun({ sessionId, thread: address, text, context, model }) {
      const thread = threadOf(sessionId, address.resumeCursor);
      if (thread.prompting) throw new ProviderError(`ACP session ${address.resumeCursor} is already running a turn`);
      await chooseModel(thread, address.resumeCursor, model);
      if (thread.prompting) throw new ProviderError(`ACP session ${address.resumeCursor} is already running a turn`);
      const where = { threadRef: address.resumeCursor };
      thread.prompting = true;
      thread.cancelAsked = false;
      thread.state = newThreadState();
      const channel = thread.channel;
      const prompt = channel.connection.agent.request(methods.agent.session.prompt, {
        sessionId: address.resumeCursor,
        prompt: promptOf(text, context),
      });
      const ended = (events: ProviderEvent[]) => {
        thread.prompting = false;
        if (threads.get(where.threadRef) !== thread) return;
        // A permission still waiting when the turn ended is answered (the runtime expires it), before the turn's end.
        cancelRequests(where.threadRef);
        emit(thread, events);
      };
      prompt.then(
        async (response) => {
          // The updates the agent sent ahead of its response are the turn's: taken before the turn ends.
          await channel.updatesTaken();
          const stop = (response as { stopReason?: unknown } | null)?.stopReason;
          if (typeof stop === "string") return ended(turnEnded(thread.state, where, response, thread.cancelAsked));
          channel.ring.note("invalid_params", `session/prompt answered ${JSON.stringify(response)?.slice(0, 200)}`);
          ended(
            turnFailed(
              thread.state,
              where,
              "the agent answered session/prompt without a stop reason",
              "protocol_error",
            ),
          );
        },
        async (error: unknown) => {
          // A dead agent ends its sessions (the host's loss is told once, for the session): no turn end of its own.
          if (thread.channel.failed) return void (thread.prompting = false);
          await channel.updatesTaken();
          ended(turnFailed(thread.state, where, messageOf(error)));
        },
      );
      return { turnRef: null };
    },
    async steerRun({ sessionId, thread: address, text }) {
      const thread = threadOf(sessionId, address.resumeCursor);
      const steered = await bounded(
        thread.channel.connection.agent.request<{ outcome?: string }>("_session/steering", {
          sessionId: address.resumeCursor,
          prompt: [{ type: "text", text }],
          _meta: { steering: { idleBehavior: "promptRequired" } },
        }),
        CALL_TIMEOUT_MS,
        "_session/steering",
      );
      if (steered?.outcome !== "injected")
        throw new ProviderError(`the agent did not take the steer into its turn (${String(steered?.outcome)})`);
    },
    async interrupt({ sessionId, thread: address }) {
      const thread = threadOf(sessionId, address.resumeCursor);
      if (thread.prompting) thread.cancelAsked = true;
      await thread.channel.connection.agent.notify(methods.agent.session.cancel, { sessionId: address.resumeCursor });
      // ACP: the client answers every permission request of the session as cancelled.
      for (const waiting of pending.values())
        if (waiting.thread === address.resumeCursor) waiting.answer({ outcome: { outcome: "cancelled" } });
    },
    async isTurnAlive({ sessionId, thread: address }) {
      return threadOf(sessionId, address.resumeCursor).prompting;
    },
    async respondToRequest({ request, response }) {
      const waiting = request.requestRef ? pending.get(request.requestRef) : undefined;
      if (!waiting) throw new HostUnavailableError(`ACP request ${request.requestRef ?? "?"} is no longer pending`);
      waiting.answer(permissionAnswer(waiting.options, response));
    },
    async forkThread({ sessionId, thread: address, cwd }) {
      const channel = threadOf(sessionId, address.resumeCursor).channel;
      const forked = await bounded(
        channel.connection.agent.request(methods.agent.session.fork, {
          sessionId: address.resumeCursor,
          cwd,
          mcpServers: [],
        }),
        CALL_TIMEOUT_MS,
        "session/fork",
      );
      return opened(sessionId, adopt(sessionId, channel, sessionIdOf(forked, "session/fork"), cwd), forked);
    },
  };
  return defineAdapter(adapter);
}

/** The session id an agent's answer names; an answer without one is a protocol error naming the call. */
function sessionIdOf(answer: unknown, method: string): string {
  const id = (answer as { sessionId?: unknown } | null)?.sessionId;
  if (typeof id === "string" && id.length > 0) return id;
  throw new ProtocolError(`the agent answered ${method} without a session id`, { method });
}

const advertised = (value: unknown): boolean => value !== undefined && value !== null && value !== false;

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
