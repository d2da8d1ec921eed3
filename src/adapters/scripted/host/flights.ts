import type { ProviderAdapter, ProviderEvent, SendRunInput } from "../../contract.js";
import type { ReattachResult } from "../protocol/host.js";

/**
 * What the scripted host knows of its sessions without asking the provider: each session's
 * threads with a turn in flight (for `resume`), and the requests each such turn waits on (for
 * `reattach`, addressed as `respondToRequest` takes them). Kept from the calls the host serves and
 * the events its provider sends.
 */

interface InFlight {
  /** The thread's resume cursor (what `resume` reports). */
  cursor: string;
  threadRef: string | null;
  turnRef: string | null;
  /** Requests the turn opened so far: the next one's ordinal follows (the scripted turn counts them so). */
  opened: number;
  /** Requests the turn waits on, addressed as `respondToRequest` takes them. */
  pending: Array<{ requestRef: string | null; ordinal: number }>;
}

type RespondInput = Parameters<ProviderAdapter["respondToRequest"]>[0];

export class Flights {
  #sessions = new Map<string, InFlight[]>();

  started(sessionId: string): void {
    if (!this.#sessions.has(sessionId)) this.#sessions.set(sessionId, []);
  }

  stopped(sessionId: string): void {
    this.#sessions.delete(sessionId);
  }

  /** Each live session with the threads whose turn is in flight (by resume cursor). */
  sessions(): Array<{ sessionId: string; activeThreads: string[] }> {
    return [...this.#sessions].map(([sessionId, flights]) => ({
      sessionId,
      activeThreads: flights.map((f) => f.cursor),
    }));
  }

  /** Marks the thread in flight before the turn can start, so even an instant terminal is seen. */
  async sendRun(input: SendRunInput, send: () => ReturnType<ProviderAdapter["sendRun"]>) {
    const { resumeCursor: cursor, threadRef } = input.thread;
    const flights = this.#sessions.get(input.sessionId);
    const existing = flights?.find((f) => f.cursor === cursor);
    const entry = existing ?? { cursor, threadRef: threadRef ?? null, turnRef: null, opened: 0, pending: [] };
    if (flights && !existing) flights.push(entry);
    try {
      const value = await send();
      entry.turnRef = value.turnRef;
      return value;
    } catch (error) {
      // A busy thread keeps its entry: the turn already running there is still in flight.
      if (flights && !existing) flights.splice(flights.indexOf(entry), 1);
      throw error;
    }
  }

  /** A request answered is no longer pending (an answer is the only way one resolves while its turn runs). */
  answered(sessionId: string, input: Partial<RespondInput>): void {
    const { thread, request } = input;
    const flight = this.#sessions.get(sessionId)?.find((f) => f.cursor === thread?.resumeCursor);
    if (!flight || !request) return;
    const index = flight.pending.findIndex((p) =>
      request.requestRef ? p.requestRef === request.requestRef : p.ordinal === request.ordinal,
    );
    if (index >= 0) flight.pending.splice(index, 1);
  }

  /** What a session still runs: its turns in flight and the requests they wait on; null for a session unknown here. */
  reattach(sessionId: string): ReattachResult {
    const flights = this.#sessions.get(sessionId);
    if (!flights) return null;
    return {
      turns: flights.map((f) => ({
        threadRef: f.threadRef,
        turnRef: f.turnRef,
        pendingRequests: f.pending.map((p) => ({ ...p })),
      })),
    };
  }

  /** Clears a thread's in-flight mark on its turn's end; counts and keeps the requests its turn opens. */
  track(sessionId: string, event: ProviderEvent): void {
    const flights = this.#sessions.get(sessionId);
    if (!flights || flights.length === 0) return;
    if (event.type === "session.state") {
      if (event.state === "stopped" || event.state === "error") flights.length = 0;
      else if (event.state === "idle" && flights.length === 1) flights.length = 0;
      return;
    }
    if (event.type === "request.opened") {
      // A subagent's request names its child thread and no turn: it is the only turn's, if any.
      const flight =
        flights.find((f) => event.turnRef !== undefined && f.turnRef === event.turnRef) ??
        flights.find((f) => f.threadRef === event.threadRef || f.cursor === event.threadRef) ??
        (flights.length === 1 ? flights[0] : undefined);
      if (!flight) return;
      flight.opened += 1;
      flight.pending.push({ requestRef: event.requestRef ?? null, ordinal: flight.opened });
      return;
    }
    if (event.type !== "turn.terminal") return;
    let index = -1;
    if (event.threadRef !== undefined) {
      // A subagent's child turn names its child thread: it matches no in-flight thread.
      index = flights.findIndex((f) => f.threadRef === event.threadRef || f.cursor === event.threadRef);
    } else {
      if (event.turnRef !== undefined) index = flights.findIndex((f) => f.turnRef === event.turnRef);
      if (index < 0 && flights.length === 1) index = 0;
    }
    if (index >= 0) flights.splice(index, 1);
  }
}
