import type { ProviderCapabilities } from "../../../capabilities/schema.js";
import type { RequestPayload, RequestResponse } from "../../../domain/items.js";
import type { ScriptedBackend } from "./backend.js";
import type { Emit, Scope } from "./turnItems.js";
import { TurnInterrupted } from "./turnWaits.js";
import { supportsApprovalFor } from "../../../capabilities/predicates.js";

/**
 * A scripted turn's requests (approvals and questions): asked only where the capability
 * record says the provider can ask them, held open until the runtime answers or the turn
 * is interrupted.
 */

/** How the provider says a request ended, by its answer. */
function outcomeOf(response: RequestResponse): string {
  if (response.kind === "decision") return response.decision;
  if (response.kind === "answers") return "answered";
  return response.success ? "tool_succeeded" : "tool_failed";
}

export interface PendingRequest {
  requestRef: string | undefined;
  ordinal: number;
  answer: (response: RequestResponse) => void;
}

export class TurnRequests {
  readonly pending: PendingRequest[] = [];
  #requestCounter = 0;

  constructor(
    private readonly caps: ProviderCapabilities,
    private readonly backend: ScriptedBackend,
    private readonly emit: Emit,
    private readonly signal: AbortSignal,
    /** The thread and turn refs an event in this scope carries (the turn's items decide). */
    private readonly where: (scope: Scope) => { threadRef?: string; turnRef?: string },
  ) {}

  canAsk(kind: "command" | "file_change" | "file_read" | "apply_patch", scope: Scope): boolean {
    if (scope.inSubagent && !this.caps.approvals.approvalsCanOriginateFromSubagents) return false;
    return supportsApprovalFor(this.caps, kind);
  }

  async approve(request: RequestPayload, itemRef: string | undefined, scope: Scope): Promise<boolean> {
    const response = await this.ask(request, itemRef, scope);
    return (
      response.kind === "decision" && (response.decision === "accept" || response.decision === "accept_for_session")
    );
  }

  ask(request: RequestPayload, itemRef: string | undefined, scope: Scope): Promise<RequestResponse> {
    const { identity, approvals } = this.caps;
    const requestRef =
      identity.nativeRequestIds !== "none" && approvals.approvalsHaveNativeRequestIds
        ? this.backend.nextId("sreq")
        : undefined;
    this.#requestCounter += 1;
    const ordinal = this.#requestCounter;
    return new Promise<RequestResponse>((resolve, reject) => {
      const onAbort = () => reject(new TurnInterrupted());
      this.signal.addEventListener("abort", onAbort, { once: true });
      this.pending.push({
        requestRef,
        ordinal,
        answer: (response) => {
          this.signal.removeEventListener("abort", onAbort);
          this.pending.splice(
            this.pending.findIndex((p) => p.ordinal === ordinal),
            1,
          );
          this.emit({
            type: "request.resolved",
            ...this.where(scope),
            requestRef,
            outcome: outcomeOf(response),
          });
          resolve(response);
        },
      });
      this.emit({ type: "request.opened", ...this.where(scope), requestRef, itemRef, request });
    });
  }
}
