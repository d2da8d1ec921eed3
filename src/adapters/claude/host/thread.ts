import type { UUID } from "node:crypto";
import type { RuntimeMode } from "../../../domain/entities.js";
import type { ProviderEvent, SandboxPolicy } from "../../contract.js";
import { notification } from "../../kit/jsonRpc.js";
import type { ClaudeThreadMapper } from "../mapper.js";
import type { PermissionMode, Query } from "../protocol/sdk.js";

/**
 * A provider thread in the host: one SDK query (with streaming input) on one Claude session, and what the host keeps
 * of its turn in flight. Its events go to the runtime as `event` notifications on stdout.
 */

/**
 * A prompt as sent to Claude. `uuid` is the SDK user message's id, chosen here: Claude writes the prompt down under it,
 * so its session tells whether this very prompt reached it (not an earlier one of the same words).
 */
export interface Prompt {
  text: string;
  uuid: UUID;
}

export interface Thread {
  cursor: string;
  sessionId: string;
  cwd: string;
  model: string | null;
  sandbox: SandboxPolicy;
  /** The mode of the turn in flight, or of the last one: a Claude process started again for the thread starts in it. */
  runtimeMode: RuntimeMode;
  /** Claude's permission mode, as it was started in or last said (it moves itself in and out of plan mode). */
  permissionMode: PermissionMode;
  mapper: ClaudeThreadMapper;
  query: Query;
  /** Sends text as a new prompt, or a prompt again under its own id (to a new Claude process). */
  push(prompt: string | Prompt): void;
  /** The prompt of the turn in flight (sent, its `result` not in yet), or null. */
  prompt: Prompt | null;
  /** This Claude process was started again to take the turn in flight (once per prompt). */
  retried: boolean;
  /** The session this one forks, for a fork Claude may not have written yet. */
  forkOf: string | null;
  /** Claude has taken up the prompt in flight (a message of its turn came). */
  running: boolean;
  /** An interrupt that came before Claude took up the prompt: sent as soon as it does, or when this timer fires. */
  heldInterrupt: NodeJS.Timeout | null;
  /** When the turn in flight was asked to stop (null: it was not). */
  interruptedAt: number | null;
}

/** Writes one JSON-RPC message to the runtime. */
export const send = (message: unknown) => process.stdout.write(`${JSON.stringify(message)}\n`);

export function emit(thread: Thread, event: ProviderEvent): void {
  send(notification("event", { sessionId: thread.sessionId, event }));
}
