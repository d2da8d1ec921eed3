import { InspectorModel } from "./model.js";
import type { Catalog, FeedCommand, FeedMessage, LogEntry, PageCommand, PageMessage } from "./protocol.js";
import { answersByQuestionId, redactEvent, redactValue } from "./redact.js";
import { AssembledStreams } from "./streams.js";

export interface PageClient {
  send(message: PageMessage): void;
}
export interface Producer {
  send(command: FeedCommand): void;
}

/** How long the hub gathers feed messages before it sends the page a new view. */
const VIEW_DELAY_MS = 25;

/**
 * Between the runtime and the pages: folds what the feed reports into an InspectorModel,
 * sends each page a redacted view of it, and routes the page's answers to requests back to
 * the runtime. In replay mode the model is a fold of a recorded log up to a chosen seq.
 */
export class InspectorHub {
  #model: InspectorModel;
  #catalog: Catalog | null;
  #pages = new Set<PageClient>();
  #producer: { id: string; socket: Producer } | null = null;
  #pendingView: NodeJS.Timeout | null = null;
  /** Pages waiting for the runtime's answer to their respond command, by command id. */
  #respondWaiters = new Map<string, PageClient>();
  #replayLog: LogEntry[] | null = null;
  #position = 0;
  /** The live log's item texts as assembled so far: deltas are masked on them, not alone. */
  #streams = new AssembledStreams();

  constructor(private readonly options: { showText: boolean; replay?: { catalog: Catalog; log: LogEntry[] } }) {
    this.#catalog = options.replay?.catalog ?? null;
    this.#model = new InspectorModel(this.#catalog);
    if (options.replay) {
      this.#replayLog = [...options.replay.log].sort((a, b) => a.seq - b.seq);
      this.#seek(this.#replayLog.at(-1)?.seq ?? 0);
    }
  }

  get mode(): "live" | "replay" {
    return this.#replayLog ? "replay" : "live";
  }

  get model(): InspectorModel {
    return this.#model;
  }

  get producerConnected(): boolean {
    return this.#producer !== null;
  }

  // ---- pages -------------------------------------------------------------------------

  addPage(page: PageClient): () => void {
    this.#pages.add(page);
    page.send(this.#hello());
    page.send({
      kind: "log",
      reset: true,
      records: this.#pageLog(this.#replayLog ?? this.#model.log, new AssembledStreams()),
    });
    page.send(this.#view());
    return () => void this.#pages.delete(page);
  }

  fromPage(page: PageClient, command: PageCommand): void {
    if (command.kind === "seek") {
      if (!this.#replayLog) return;
      this.#seek(command.seq);
      this.#broadcast(this.#view());
      return;
    }
    if (command.kind === "respond") {
      if (!this.#producer)
        return page.send({
          kind: "respond.result",
          id: command.id,
          ok: false,
          error: this.#replayLog ? "replay: nothing can be answered" : "no runtime connected",
        });
      let respond = command.command;
      if (!this.options.showText && respond?.response?.kind === "answers") {
        // The page saw placeholders for question ids (they can be the question's text): key the answers by the real
        // ids.
        const opened = this.#model.log.find(
          (r) => r.event.type === "request.opened" && r.event.requestId === respond.requestId,
        );
        if (!opened)
          return page.send({
            kind: "respond.result",
            id: command.id,
            ok: false,
            error: `no request ${respond.requestId} in the log`,
          });
        try {
          respond = {
            ...respond,
            response: { kind: "answers", answers: answersByQuestionId(opened.event, respond.response.answers ?? {}) },
          };
        } catch (error) {
          return page.send({ kind: "respond.result", id: command.id, ok: false, error: (error as Error).message });
        }
      }
      this.#respondWaiters.set(command.id, page);
      this.#producer.socket.send({ kind: "respond", id: command.id, command: respond });
    }
  }

  // ---- the runtime's feed ------------------------------------------------------------

  /** A runtime (re)connected: a new producer id means a new runtime life, so the picture starts over. */
  fromFeed(socket: Producer, message: FeedMessage): void {
    if (this.#replayLog) return; // a replay shows its recording, nothing live
    switch (message.kind) {
      case "hello":
        // Every (re)connect resends the runtime's whole picture: start over from it.
        this.#producer = { id: message.producerId, socket };
        this.#catalog = message.catalog;
        this.#model = new InspectorModel(this.#catalog);
        this.#streams = new AssembledStreams();
        this.#broadcast(this.#hello());
        this.#broadcast({ kind: "log", reset: true, records: [] });
        break;
      case "actor":
        this.#model.actors.set(message.id, {
          id: message.id,
          machine: message.machine,
          state: message.state,
          status: message.status,
          context: message.context,
        });
        break;
      case "log": {
        const fresh = this.#model.append(message.records);
        if (fresh.length > 0) this.#broadcast({ kind: "log", reset: false, records: this.#pageLog(fresh) });
        break;
      }
      case "capabilities":
        Object.assign(this.#model.targets, message.targets);
        break;
      case "affordances":
        this.#model.affordances.set(message.threadId, message.value as never);
        break;
      case "respond.result": {
        const page = this.#respondWaiters.get(message.id);
        this.#respondWaiters.delete(message.id);
        page?.send(message);
        break;
      }
    }
    this.#scheduleView();
  }

  /** The producer's socket closed: keep its picture on the page (it may come back) but say it is gone. */
  feedClosed(socket: Producer): void {
    if (this.#producer?.socket !== socket) return;
    this.#producer = null;
    for (const [id, page] of this.#respondWaiters)
      page.send({ kind: "respond.result", id, ok: false, error: "the runtime disconnected" });
    this.#respondWaiters.clear();
    this.#broadcast(this.#hello());
  }

  // ---- views ----------------------------------------------------------------------------

  #seek(seq: number): void {
    const log = this.#replayLog!;
    const head = log.at(-1)?.seq ?? 0;
    this.#position = Math.max(0, Math.min(seq, head));
    this.#model = new InspectorModel(this.#catalog);
    this.#model.append(log.filter((r) => r.seq <= this.#position));
  }

  #hello(): PageMessage {
    return {
      kind: "hello",
      mode: this.mode,
      showText: this.options.showText,
      catalog: this.#catalog,
      connected: this.#replayLog !== null || this.#producer !== null,
    };
  }

  #view(): PageMessage {
    const head = this.#replayLog ? (this.#replayLog.at(-1)?.seq ?? 0) : this.#model.head;
    const seq = this.#replayLog ? this.#position : head;
    return {
      kind: "view",
      tree: this.#model.tree(),
      capabilities: redactValue(this.#model.capabilities(), this.options.showText) as never,
      requests: this.#model.requests(),
      position: { seq, head },
    };
  }

  /**
   * Records as the page may see them; `streams` follows the log from seq 1 (the live one, or a fresh one for a whole
   * log).
   */
  #pageLog(records: LogEntry[], streams = this.#streams): LogEntry[] {
    // Hidden text shows a delta's length only: nothing to assemble.
    const assembled = (event: LogEntry["event"]) => (this.options.showText ? streams.apply(event) : event);
    return records.map((r) => ({
      seq: r.seq,
      at: r.at,
      event: redactEvent(assembled(r.event), this.options.showText),
    }));
  }

  #scheduleView(): void {
    if (this.#pendingView) return;
    this.#pendingView = setTimeout(() => {
      this.#pendingView = null;
      this.#broadcast(this.#view());
    }, VIEW_DELAY_MS);
  }

  #broadcast(message: PageMessage): void {
    for (const page of this.#pages) page.send(message);
  }

  close(): void {
    if (this.#pendingView) clearTimeout(this.#pendingView);
    this.#pendingView = null;
  }
}
