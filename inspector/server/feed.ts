import { randomUUID } from "node:crypto";
import { createInspector, type StatelyInspectionEvent } from "@statelyai/inspect";
import type { InspectionEvent } from "xstate";
import WebSocket from "ws";
import { FEED_LIMITS, fitRecord, LogBatcher } from "./feedLimits.js";
import type { Catalog, FeedCommand, FeedMessage, InspectedRuntime, LogEntry } from "./protocol.js";

export interface InspectorFeedOptions {
  /** The server's feed address (`InspectorServer.feedUrl`), token included. */
  url: string;
  /** Backoff between reconnect attempts, doubling from `minMs` to `maxMs`. */
  reconnect?: { minMs?: number; maxMs?: number };
}

export interface InspectorFeed {
  /** Give this to the runtime's `inspect` option: every actor's inspection events. */
  readonly inspect: (event: InspectionEvent) => void;
  /** Starts sending the runtime's log, capabilities and affordances, and answering the page. */
  attach(runtime: InspectedRuntime, catalog: Catalog, targets: string[]): void;
  readonly connected: boolean;
  /** Messages not sent because they were over the server's limit (log records are cut instead, so they never are). */
  readonly oversized: number;
  close(): void;
}

/** Context fields an actor may show (ids and names only: context can hold text). */
const CONTEXT_FIELDS = ["target", "providerTarget", "threadId", "appThreadId", "runId", "sessionId"];

/** An actor in one of these is finished: nothing more will come from it. */
const FINAL_STATUS = new Set(["done", "stopped", "error"]);

const stateValue = (value: unknown): string => {
  if (typeof value === "string") return value;
  if (value && typeof value === "object")
    return Object.entries(value)
      .map(([k, v]) => (v && (typeof v === "string" || Object.keys(v).length > 0) ? `${k}.${stateValue(v)}` : k))
      .join(",");
  return "";
};

/**
 * The runtime's side of the inspector. Actor inspection goes through @statelyai/inspect's
 * `createInspector` with an adapter of ours: its own WebSocket adapter gives up after a clean
 * close, this one reconnects with backoff and, on every (re)connect, sends the whole picture
 * again (latest actor states, the log from seq 0, capabilities), so either side can restart.
 */
export function createInspectorFeed(options: InspectorFeedOptions): InspectorFeed {
  const producerId = randomUUID();
  const minMs = options.reconnect?.minMs ?? 100;
  const maxMs = options.reconnect?.maxMs ?? 2_000;
  const actors = new Map<
    string,
    { id: string; machine: string; state: string; status: string; context: Record<string, string> }
  >();
  const bySession = new Map<string, string>();
  /** An actor's inspection session ids, to forget them with it. */
  const sessionsOf = new Map<string, Set<string>>();
  let runtime: InspectedRuntime | null = null;
  let catalog: Catalog | null = null;
  let targets: string[] = [];
  let ws: WebSocket | null = null;
  let open = false;
  let closed = false;
  let backoff = minMs;
  let retry: NodeJS.Timeout | null = null;
  let unsubscribe: (() => void) | null = null;
  let affordanceTimer: NodeJS.Timeout | null = null;
  const dirtyThreads = new Set<string>();
  let oversized = 0;

  /**
   * Never a message over the server's limit: the server would drop the socket, and the
   * reconnect would resend the same picture and be dropped again, without end.
   */
  const sendText = (text: string) => {
    if (!open || ws?.readyState !== WebSocket.OPEN) return;
    if (text.length * 3 > FEED_LIMITS.messageBytes && Buffer.byteLength(text) > FEED_LIMITS.messageBytes)
      return void oversized++;
    ws.send(text);
  };
  const send = (message: FeedMessage) => sendText(JSON.stringify(message));

  const actorMessage = (a: {
    id: string;
    machine: string;
    state: string;
    status: string;
    context: Record<string, string>;
  }): FeedMessage => ({ kind: "actor", ...a });

  const onInspection = (e: StatelyInspectionEvent) => {
    if (e.type === "@xstate.event") return;
    let id = bySession.get(e.sessionId);
    let machine = id ? actors.get(id)?.machine : undefined;
    if (e.type === "@xstate.actor") {
      id = e.name;
      machine = machineId(e.definition) ?? e.name;
      bySession.set(e.sessionId, id);
      sessionsOf.set(id, (sessionsOf.get(id) ?? new Set()).add(e.sessionId));
    }
    if (!id || !machine) return;
    const snapshot = (e.snapshot ?? {}) as { value?: unknown; status?: string; context?: Record<string, unknown> };
    const context = Object.fromEntries(
      CONTEXT_FIELDS.filter((k) => typeof snapshot.context?.[k] === "string").map((k) => [
        k,
        snapshot.context![k] as string,
      ]),
    );
    const next = { id, machine, state: stateValue(snapshot.value), status: snapshot.status ?? "active", context };
    const prev = actors.get(id);
    if (prev && prev.state === next.state && prev.status === next.status) return;
    actors.set(id, next);
    send(actorMessage(next));
    if (FINAL_STATUS.has(next.status)) {
      // Its final state is sent (or, while disconnected, the log tells it): forget it, so a
      // long-lived runtime keeps only its live actors and a reconnect resends only those.
      bySession.delete(e.sessionId);
      const sessions = sessionsOf.get(id);
      sessions?.delete(e.sessionId);
      if (!sessions?.size) {
        actors.delete(id);
        sessionsOf.delete(id);
      }
    }
  };

  const inspector = createInspector({ send: onInspection }, { serialize: (e) => e });

  /** `messages`: the records as `log` messages, each within the limits (see feedLimits.ts). */
  const afterLog = (records: LogEntry[], messages: string[]) => {
    for (const message of messages) sendText(message);
    for (const r of records) {
      const threadId = r.event.threadId;
      if (typeof threadId === "string" && r.event.type.startsWith("request.")) dirtyThreads.add(threadId);
      if (r.event.type === "session.started" || r.event.type === "session.state") sendCapabilities();
    }
    if (dirtyThreads.size > 0 && !affordanceTimer) affordanceTimer = setTimeout(flushAffordances, 10);
  };

  const flushAffordances = () => {
    affordanceTimer = null;
    for (const threadId of dirtyThreads) {
      try {
        send({ kind: "affordances", threadId, value: runtime!.affordances(threadId) });
      } catch {
        // The runtime closed or the thread is gone: the page keeps the log's word for it.
      }
    }
    dirtyThreads.clear();
  };

  const sendCapabilities = () => {
    if (!runtime) return;
    try {
      send({ kind: "capabilities", targets: Object.fromEntries(targets.map((t) => [t, runtime!.capabilities(t)])) });
    } catch {
      // closed
    }
  };

  /** The whole picture, for a server that just (re)connected. */
  const resend = () => {
    if (!runtime || !catalog) return;
    send({ kind: "hello", producerId, dataDir: runtime.dataDir, catalog });
    for (const a of actors.values()) send(actorMessage(a));
    sendCapabilities();
    unsubscribe?.();
    let batch: LogEntry[] = [];
    let messages: string[] = [];
    const batcher = new LogBatcher();
    let flushQueued = false;
    const flush = () => {
      flushQueued = false;
      const records = batch;
      const last = batcher.take();
      const ready = last ? [...messages, last] : messages;
      batch = [];
      messages = [];
      if (records.length > 0) afterLog(records, ready);
    };
    try {
      unsubscribe = runtime.subscribe({ afterSeq: 0 }, (record) => {
        batch.push(record);
        // A record over the record limit goes cut; a message is full at 500 records or its byte budget.
        const full = batcher.add(fitRecord(record));
        if (full) messages.push(full);
        if (messages.length > 0) flush();
        else if (!flushQueued) {
          flushQueued = true;
          queueMicrotask(flush);
        }
      });
      for (const { threadId } of runtime.listThreads()) dirtyThreads.add(threadId);
    } catch {
      unsubscribe = null;
    }
  };

  const onCommand = async (command: FeedCommand) => {
    if (command.kind !== "respond" || !runtime) return;
    try {
      await runtime.respond({ ...command.command });
      send({ kind: "respond.result", id: command.id, ok: true, error: null });
    } catch (error) {
      const e = error as { code?: string; message?: string };
      send({
        kind: "respond.result",
        id: command.id,
        ok: false,
        error: e.code ? `${e.code}: ${e.message}` : String(error),
      });
    }
  };

  const connect = () => {
    retry = null;
    if (closed) return;
    const socket = new WebSocket(options.url, { handshakeTimeout: 5_000 });
    ws = socket;
    socket.on("open", () => {
      open = true;
      backoff = minMs;
      resend();
    });
    socket.on("message", (data) => {
      try {
        void onCommand(JSON.parse(data.toString()) as FeedCommand);
      } catch {
        // not a command
      }
    });
    socket.on("error", () => {
      // "close" follows and reconnects.
    });
    socket.on("close", () => {
      if (ws === socket) {
        open = false;
        unsubscribe?.();
        unsubscribe = null;
      }
      if (!closed && !retry) {
        retry = setTimeout(connect, backoff);
        retry.unref();
        backoff = Math.min(maxMs, backoff * 2);
      }
    });
  };

  return {
    inspect: (event) => inspector.inspect.next?.(event),
    attach(rt, cat, targetIds) {
      runtime = rt;
      catalog = cat;
      targets = targetIds;
      if (open) resend();
      else if (!ws) connect();
    },
    get connected() {
      return open;
    },
    get oversized() {
      return oversized;
    },
    close() {
      closed = true;
      if (retry) clearTimeout(retry);
      if (affordanceTimer) clearTimeout(affordanceTimer);
      unsubscribe?.();
      unsubscribe = null;
      ws?.close();
      ws = null;
      open = false;
    },
  };
}

function machineId(definition: string | undefined): string | undefined {
  if (!definition) return undefined;
  try {
    const id = (JSON.parse(definition) as { id?: unknown }).id;
    return typeof id === "string" ? id : undefined;
  } catch {
    return undefined;
  }
}
