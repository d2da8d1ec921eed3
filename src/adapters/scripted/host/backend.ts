import { randomBytes } from "node:crypto";
import type { RuntimeMode, TurnTerminalStatus } from "../../../domain/entities.js";
import type { HandoffContext, ProviderThreadSnapshot } from "../../contract.js";
import type { DeliveredContext } from "../../kit/context.js";

/**
 * The scripted provider's own persistent state: its threads and their turns. Share one
 * backend between adapter instances to model a provider that outlives the runtime
 * (resume after a restart); a fresh backend models one that forgot everything.
 */
export interface BackendTurn {
  turnRef: string;
  userText: string;
  assistantText: string;
  status: TurnTerminalStatus | "running";
  /** The explicit context (handoff, fork, rebuild) the turn was sent with. */
  context?: HandoffContext | null;
  /** That context as the provider received it (the kit's formatter: where its delivery says, the header once). */
  delivered?: DeliveredContext;
  /** The model the turn ran with (null: the provider's default). */
  model?: string | null;
  /** The mode the turn worked in. */
  runtimeMode?: RuntimeMode;
}

export interface BackendThread {
  /** Globally unique native id; the resume cursor. */
  id: string;
  turns: BackendTurn[];
  /** A subagent's child thread: the native thread whose turn started it ("" when that thread has no ref). */
  parentId?: string;
}

export class ScriptedBackend {
  readonly threads = new Map<string, BackendThread>();
  /** Every summary the provider was asked to write (`summarize`), in order. */
  readonly summaries: Array<{ transcript: string; maxChars: number }> = [];
  /** Distinguishes this backend's ids from another's, so a forgotten cursor never matches by accident. */
  readonly #prefix = randomBytes(3).toString("hex");
  #counter = 0;
  #gates = new Map<string, { opened: Promise<void>; open: () => void }>();

  #gate(name: string) {
    let gate = this.#gates.get(name);
    if (!gate) {
      let open!: () => void;
      const opened = new Promise<void>((resolve) => (open = resolve));
      gate = { opened, open };
      this.#gates.set(name, gate);
    }
    return gate;
  }

  /** Lets every turn waiting at (or later reaching) a `gate` step of this name go on. */
  openGate(name: string): void {
    this.#gate(name).open();
  }

  /** Resolves once the gate is opened. */
  gateOpened(name: string): Promise<void> {
    return this.#gate(name).opened;
  }

  /** Native ids unique across every backend (and every adapter sharing this one). */
  nextId(kind: string): string {
    this.#counter += 1;
    return `${kind}-${this.#prefix}-${this.#counter}`;
  }

  createThread(turns: BackendTurn[] = []): BackendThread {
    const thread = { id: this.nextId("sthread"), turns };
    this.threads.set(thread.id, thread);
    return thread;
  }

  snapshot(thread: BackendThread, exposeIds: { thread: boolean; turn: boolean }): ProviderThreadSnapshot {
    return {
      threadRef: exposeIds.thread ? thread.id : null,
      turns: thread.turns.map((t) => ({
        turnRef: exposeIds.turn ? t.turnRef : null,
        status: t.status,
        userText: t.userText,
        assistantText: t.assistantText,
      })),
    };
  }
}
