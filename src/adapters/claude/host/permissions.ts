import { randomUUID } from "node:crypto";
import { ProviderError } from "../../../domain/errors.js";
import type { CanUseTool } from "../protocol/sdk.js";
import { permissionPayload } from "../tools.js";
import type { HostParams } from "../transport.js";
import { refusal } from "./modes.js";
import { emit, type Thread } from "./thread.js";

/**
 * Claude's permission prompts (`canUseTool`): refused at once where the turn's runtime mode refuses them unasked
 * (`modes.ts`), else a runtime request, answered with `respond`. A prompt lives as long as the SDK call that asked.
 */

/** A permission answer: allow (with the user's answers, for AskUserQuestion) or deny. */
interface Answer {
  allow: boolean;
  message: string;
  answers?: Record<string, string | string[]>;
}

const pending = new Map<string, (answer: Answer) => void>();

/** The `canUseTool` of a thread's query. */
export function permissionGate(thread: Thread): CanUseTool {
  return async (tool, toolInput, options) => {
    // The turn's mode may refuse it without asking anyone.
    const refused = refusal(tool, thread.runtimeMode);
    if (refused !== null) return { behavior: "deny", message: refused };
    const requestRef = options.toolUseID ?? randomUUID();
    // A subagent's own prompt hangs under the subagent: Claude asks before it forwards the subagent's tool use, so
    // the request names the subagent itself, whose start is out once its agent id is known.
    const subagent = options.agentID ? await thread.mapper.subagentRef(options.agentID, options.signal) : undefined;
    if (options.signal.aborted) return { behavior: "deny", message: "interrupted" };
    const itemRef = subagent ?? options.toolUseID;
    emit(thread, {
      type: "request.opened",
      threadRef: thread.cursor,
      requestRef,
      ...(itemRef !== undefined ? { itemRef } : {}),
      request: permissionPayload(tool, toolInput),
    });
    const answer = await new Promise<Answer>((resolve) => {
      pending.set(requestRef, resolve);
      options.signal.addEventListener("abort", () => resolve({ allow: false, message: "interrupted" }), {
        once: true,
      });
    });
    pending.delete(requestRef);
    emit(thread, {
      type: "request.resolved",
      threadRef: thread.cursor,
      requestRef,
      outcome: answer.allow ? "accept" : "decline",
    });
    if (!answer.allow) return { behavior: "deny", message: answer.message };
    // AskUserQuestion takes its answers keyed by question text; several choices are comma-separated.
    const answers =
      answer.answers &&
      Object.fromEntries(Object.entries(answer.answers).map(([q, a]) => [q, Array.isArray(a) ? a.join(", ") : a]));
    return { behavior: "allow", updatedInput: answers ? { ...toolInput, answers } : toolInput };
  };
}

/** Answers a pending permission prompt. */
export function respond({ requestRef, allow, message, answers }: HostParams<"respond">): void {
  const resolve = pending.get(requestRef);
  if (!resolve) throw new ProviderError(`claude host: request ${requestRef} is not pending`);
  resolve({ allow, message: message ?? "The user declined.", ...(answers ? { answers } : {}) });
}
