import type { ProviderCapabilities } from "../capabilities/index.js";
import type { DynamicToolDefinition, ProviderThreadAddress, SandboxPolicy } from "../adapters/contract.js";
import type { DomainEvent } from "../domain/events.js";
import type { IdSource } from "../domain/ids.js";
import type { Actors } from "./actors.js";
import type { Projections, ProviderThreadRecord } from "./projections.js";

/** What a provider target holds and needs (see targets.ts). */

export interface LiveSession {
  sessionId: string;
  hostGeneration: number;
  capabilities: ProviderCapabilities;
}

export interface LoadedThread {
  providerThreadId: string;
  sessionId: string;
  /** What every call on this provider thread passes: its handle, with its app thread's cwd. */
  handle: ProviderThreadAddress;
  /** Not made yet: the next turn makes it (`newThread`), and `bindMadeThread` records it as `via`. */
  unmade?: { via: ProviderThreadRecord["origin"] };
}

/** What a target needs from the runtime. */
export interface TargetHost {
  readonly views: Projections;
  readonly sandbox: SandboxPolicy;
  readonly ids: IdSource;
  readonly sessionIdleMs: number | null;
  /** The embedder's registered tools, as a session is told of them. */
  readonly tools: DynamicToolDefinition[];
  readonly actors: Actors;
  /** Sends to actors inside the dispatcher (their records committed, their effects performed); nothing once closed. */
  act(fn: () => void): void;
  /** Records a fact no machine emits (a handoff computed for the next turn). */
  commit(event: DomainEvent): void;
}
