import type { ProviderCapabilities } from "../../capabilities/schema.js";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { TurnTerminalStatus } from "../../domain/entities.js";
import type { ItemStatus, ItemStream, ProviderItemKind, RequestPayload, RequestResponse } from "../../domain/items.js";
import type { ProviderEvent, SandboxPolicy } from "../contract.js";
import type { ScriptedBackend } from "./backend.js";
import type { ScriptStep } from "./script.js";

/**
 * One scripted turn in flight. It emits exactly what the capability record declares:
 * refs only where identity exposes them, no approvals the provider cannot ask, no plan
 * or todo artifacts it cannot emit.
 */

export class TurnInterrupted extends Error {}
class TurnFailed extends Error {
  constructor(readonly step: Extract<ScriptStep, { type: "fail" }>) {
    super(step.message);
  }
}

type Emit = (event: ProviderEvent) => void;
/** Where nested events go: the child thread's ref, or the parent item they hang under. */
interface Scope {
  threadRef: string | undefined;
  parentItemRef: string | undefined;
  inSubagent: boolean;
}

export interface PendingRequest {
  requestRef: string | undefined;
  ordinal: number;
  answer: (response: RequestResponse) => void;
}

export class ScriptedTurn {
  readonly abort = new AbortController();
  readonly pending: PendingRequest[] = [];
  readonly steers: string[] = [];
  assistantText = "";
  #itemCounter = 0;
  #requestCounter = 0;

  constructor(
    readonly turnRef: string | undefined,
    private readonly caps: ProviderCapabilities,
    private readonly backend: ScriptedBackend,
    private readonly emit: Emit,
    private readonly chunkDelayMs: number,
    /** Where file changes with content are written, under which sandbox policy. */
    private readonly workspace: { cwd: string | null; sandbox: SandboxPolicy } = {
      cwd: null,
      sandbox: "workspace-write",
    },
  ) {}

  /** Runs every step; resolves with the terminal event fields. */
  async run(
    steps: ScriptStep[],
    threadRef: string | undefined,
  ): Promise<
    Pick<
      Extract<ProviderEvent, { type: "turn.terminal" }>,
      "status" | "threadDisposition" | "failureClass" | "message" | "retryable"
    >
  > {
    const scope: Scope = { threadRef, parentItemRef: undefined, inSubagent: false };
    try {
      for (const step of steps) await this.#step(step, scope);
      await this.#applySteers(scope); // a steer that arrived during the last step still lands
      return {
        status: "completed",
        threadDisposition: "reusable",
        failureClass: null,
        message: null,
        retryable: false,
      };
    } catch (error) {
      if (error instanceof TurnInterrupted) {
        return {
          status: "interrupted",
          threadDisposition: "reusable",
          failureClass: null,
          message: null,
          retryable: false,
        };
      }
      if (error instanceof TurnFailed) {
        const s = error.step;
        return {
          status: "failed",
          threadDisposition: s.broken ? "broken" : "reusable",
          failureClass: s.failureClass ?? "provider_error",
          message: s.message,
          retryable: s.retryable ?? false,
        };
      }
      // A step that throws (a file it cannot write, a bug in a script) ends its turn failed:
      // a provider never leaves a turn without a terminal because one of its tools broke.
      return {
        status: "failed",
        threadDisposition: "reusable",
        failureClass: "provider_error",
        message: `a script step threw: ${String(error)}`,
        retryable: false,
      };
    }
  }

  async #step(step: ScriptStep, scope: Scope): Promise<void> {
    this.#checkAborted();
    await this.#applySteers(scope);
    const { caps } = this;
    switch (step.type) {
      case "text":
        return this.#message("assistant_message", step.text, scope, step.chunkSize);
      case "reasoning":
        if (caps.streaming.streamsReasoning) await this.#message("reasoning", step.text, scope);
        return;
      case "tool": {
        const ref = this.#itemRef(true);
        this.#started("tool_call", ref, scope, { toolName: step.name, input: step.input });
        if (caps.tools.emitsToolOutput) await this.#stream("tool_call", ref, scope, step.output, "output");
        this.#completed("tool_call", ref, scope, { status: step.failed ? "failed" : "completed", output: step.output });
        return;
      }
      case "command": {
        const ref = this.#itemRef(true);
        this.#started("command_execution", ref, scope, { command: step.command });
        const asked = step.approval && this.#canAsk("command", scope);
        if (asked && !(await this.#approve({ kind: "command", command: step.command }, ref, scope))) {
          this.#completed("command_execution", ref, scope, { status: "declined" });
          return;
        }
        if (caps.streaming.streamsToolOutput)
          await this.#stream("command_execution", ref, scope, step.output, "output");
        this.#completed("command_execution", ref, scope, {
          status: "completed",
          output: step.output,
          exitCode: step.exitCode ?? 0,
        });
        return;
      }
      case "file_change": {
        const ref = this.#itemRef(true);
        this.#started("file_change", ref, scope, { path: step.path, diff: step.diff });
        const asked = step.approval && this.#canAsk("file_change", scope);
        const payload: RequestPayload = { kind: "file_change", path: step.path, diff: step.diff };
        // Without an approval to ask, the sandbox decides: read-only refuses every write.
        const accepted = asked ? await this.#approve(payload, ref, scope) : this.workspace.sandbox !== "read-only";
        if (accepted && step.content !== undefined) await this.#write(step.path, step.content);
        this.#completed("file_change", ref, scope, { status: accepted ? "completed" : "declined" });
        return;
      }
      case "question": {
        if (!caps.planning.supportsStructuredQuestions) {
          return this.#message("assistant_message", step.questions.map((q) => q.question).join("\n"), scope);
        }
        const response = await this.#ask({ kind: "user_input", questions: step.questions }, undefined, scope);
        const answers = response.kind === "answers" ? response.answers : {};
        return this.#message("assistant_message", `Noted: ${JSON.stringify(answers)}`, scope);
      }
      case "todo":
        if (caps.planning.emitsTodoList)
          this.emit({ type: "todo.updated", ...this.#where(scope), itemRef: this.#planRef(), items: step.items });
        return;
      case "plan":
        if (caps.planning.emitsPlanUpdated) {
          const explanation = step.explanation === undefined ? {} : { explanation: step.explanation };
          this.emit({
            type: "plan.updated",
            ...this.#where(scope),
            itemRef: this.#planRef(),
            steps: step.steps,
            ...explanation,
          });
        }
        return;
      case "proposed_plan":
        if (caps.planning.emitsProposedPlan) {
          this.emit({ type: "plan.proposed", ...this.#where(scope), itemRef: this.#planRef(), text: step.text });
          return;
        }
        return this.#message("assistant_message", step.text, scope);
      case "subagent":
        return this.#subagent(step, scope);
      case "fail":
        throw new TurnFailed(step);
      case "hang":
        return this.#wait(null);
      case "gate":
        return this.#until(this.backend.gateOpened(step.name));
      case "pause":
        return this.#wait(step.ms);
    }
  }

  async #subagent(step: Extract<ScriptStep, { type: "subagent" }>, scope: Scope): Promise<void> {
    const { subagents, turns } = this.caps;
    if (!subagents.supportsSubagents) {
      for (const child of step.steps) await this.#step(child, scope);
      return;
    }
    const itemRef = this.#itemRef(false);
    const { identity } = this.caps;
    const childThreadRef =
      subagents.exposesSubagentThreadIds && identity.nativeThreadIds !== "none"
        ? this.backend.nextId("sthread")
        : undefined;
    const lifecycle = subagents.emitsSubagentLifecycle;
    if (lifecycle)
      this.emit({
        type: "subagent.started",
        ...this.#where(scope),
        itemRef,
        childThreadRef,
        agent: step.agent,
        prompt: step.prompt,
      });
    const child: Scope = {
      threadRef: childThreadRef ?? scope.threadRef,
      parentItemRef: childThreadRef ? undefined : itemRef,
      inSubagent: true,
    };
    const exposesTurnRef = turns.exposesNativeTurnId && identity.nativeTurnIds !== "none";
    const childTurn = childThreadRef
      ? { threadRef: childThreadRef, ...(exposesTurnRef ? { turnRef: this.backend.nextId("sturn") } : {}) }
      : null;
    if (childTurn && turns.emitsTurnStarted) this.emit({ type: "turn.started", ...childTurn });
    let status: TurnTerminalStatus = "completed";
    try {
      for (const s of step.steps) await this.#step(s, child);
    } catch (error) {
      status = error instanceof TurnInterrupted ? "interrupted" : "failed";
      throw error;
    } finally {
      if (childTurn && turns.emitsTurnCompleted) {
        this.emit({
          type: "turn.terminal",
          ...childTurn,
          status,
          threadDisposition: "reusable",
          failureClass: null,
          message: null,
          retryable: false,
        });
      }
      if (lifecycle)
        this.emit({
          type: "subagent.completed",
          ...this.#where(scope),
          itemRef,
          childThreadRef,
          status,
          result: `${step.agent} ${status}`,
        });
    }
  }

  async #write(path: string, content: string): Promise<void> {
    if (!this.workspace.cwd) return;
    const file = join(this.workspace.cwd, path);
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, content);
  }

  async #message(
    kind: "assistant_message" | "reasoning",
    text: string,
    scope: Scope,
    chunkSize?: number,
  ): Promise<void> {
    const ref = this.#itemRef(false);
    const { streaming } = this.caps;
    this.#started(kind, ref, scope, undefined);
    const streams = kind === "assistant_message" ? streaming.streamsAssistantText : streaming.streamsReasoning;
    if (streams) await this.#stream(kind, ref, scope, text, "text", chunkSize);
    if (kind === "assistant_message" && !scope.inSubagent) this.assistantText += text;
    if (kind === "reasoning" || streaming.emitsMessageCompleted || !streams) {
      this.#completed(kind, ref, scope, { status: "completed", text });
    }
  }

  async #stream(
    kind: ProviderItemKind,
    itemRef: string | undefined,
    scope: Scope,
    text: string,
    stream: ItemStream,
    chunkSize = 12,
  ): Promise<void> {
    for (let i = 0; i < text.length; i += chunkSize) {
      this.#checkAborted();
      this.emit({
        type: "item.delta",
        ...this.#where(scope),
        itemRef,
        kind,
        stream,
        delta: text.slice(i, i + chunkSize),
      });
      await this.#tick();
    }
  }

  #started(
    kind: ProviderItemKind,
    itemRef: string | undefined,
    scope: Scope,
    detail: Record<string, unknown> | undefined,
  ): void {
    const isTool = kind !== "assistant_message" && kind !== "reasoning";
    if (isTool && !this.caps.tools.emitsToolStarted) return;
    const parentItemRef = scope.parentItemRef;
    this.emit({
      type: "item.started",
      ...this.#where(scope),
      itemRef,
      parentItemRef,
      kind,
      ...(detail ? { detail } : {}),
    });
  }

  #completed(
    kind: ProviderItemKind,
    itemRef: string | undefined,
    scope: Scope,
    fields: { status: ItemStatus; text?: string; output?: string; exitCode?: number },
  ): void {
    const isTool = kind !== "assistant_message" && kind !== "reasoning";
    if (isTool && !this.caps.tools.emitsToolCompleted) return;
    this.emit({ type: "item.completed", ...this.#where(scope), itemRef, kind, ...fields });
  }

  #canAsk(kind: "command" | "file_change", scope: Scope): boolean {
    const a = this.caps.approvals;
    if (scope.inSubagent && !a.approvalsCanOriginateFromSubagents) return false;
    return kind === "command" ? a.supportsCommandApproval : a.supportsFileChangeApproval;
  }

  async #approve(request: RequestPayload, itemRef: string | undefined, scope: Scope): Promise<boolean> {
    const response = await this.#ask(request, itemRef, scope);
    return (
      response.kind === "decision" && (response.decision === "accept" || response.decision === "accept_for_session")
    );
  }

  #ask(request: RequestPayload, itemRef: string | undefined, scope: Scope): Promise<RequestResponse> {
    const { identity, approvals } = this.caps;
    const requestRef =
      identity.nativeRequestIds !== "none" && approvals.approvalsHaveNativeRequestIds
        ? this.backend.nextId("sreq")
        : undefined;
    this.#requestCounter += 1;
    const ordinal = this.#requestCounter;
    return new Promise<RequestResponse>((resolve, reject) => {
      const onAbort = () => reject(new TurnInterrupted());
      this.abort.signal.addEventListener("abort", onAbort, { once: true });
      this.pending.push({
        requestRef,
        ordinal,
        answer: (response) => {
          this.abort.signal.removeEventListener("abort", onAbort);
          this.pending.splice(
            this.pending.findIndex((p) => p.ordinal === ordinal),
            1,
          );
          this.emit({
            type: "request.resolved",
            ...this.#where(scope),
            requestRef,
            outcome: response.kind === "decision" ? response.decision : "answered",
          });
          resolve(response);
        },
      });
      this.emit({ type: "request.opened", ...this.#where(scope), requestRef, itemRef, request });
    });
  }

  /** A native steer shows up as an acknowledgement in the turn's output, before the next step. */
  async #applySteers(scope: Scope): Promise<void> {
    while (this.steers.length > 0) {
      const text = this.steers.shift()!;
      await this.#message("assistant_message", `(steered: ${text}) `, scope);
    }
  }

  #itemRef(isTool: boolean): string | undefined {
    const { identity, tools } = this.caps;
    if (identity.nativeItemIds === "none" || (isTool && !tools.exposesToolItemIds)) return undefined;
    this.#itemCounter += 1;
    // Weak ids are only unique within a turn (they restart every turn), as weak ids do.
    return identity.nativeItemIds === "weak" ? `item-${this.#itemCounter}` : this.backend.nextId("sitem");
  }

  /** Plan and todo updates carry item ids only when the provider says its plan deltas do. */
  #planRef(): string | undefined {
    return this.caps.planning.planDeltasHaveItemIds ? this.#itemRef(false) : undefined;
  }

  #where(scope: Scope): { threadRef?: string; turnRef?: string } {
    const where: { threadRef?: string; turnRef?: string } = {};
    if (scope.threadRef) where.threadRef = scope.threadRef;
    if (this.turnRef && !scope.inSubagent) where.turnRef = this.turnRef;
    return where;
  }

  #checkAborted(): void {
    if (this.abort.signal.aborted) throw new TurnInterrupted();
  }

  #tick(): Promise<void> {
    return this.#wait(this.chunkDelayMs);
  }

  /** Waits for `opened` unless the turn is interrupted first. */
  #until(opened: Promise<void>): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.abort.signal.aborted) return reject(new TurnInterrupted());
      const onAbort = () => reject(new TurnInterrupted());
      this.abort.signal.addEventListener("abort", onAbort, { once: true });
      void opened.then(() => {
        this.abort.signal.removeEventListener("abort", onAbort);
        resolve();
      });
    });
  }

  /** Waits `ms` (null: forever) unless the turn is interrupted first. */
  #wait(ms: number | null): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.abort.signal.aborted) return reject(new TurnInterrupted());
      const done = () => {
        this.abort.signal.removeEventListener("abort", onAbort);
        resolve();
      };
      const timer = ms === null ? null : ms === 0 ? setImmediate(done) : setTimeout(done, ms);
      const onAbort = () => {
        if (timer !== null) {
          clearTimeout(timer as NodeJS.Timeout);
          clearImmediate(timer as NodeJS.Immediate);
        }
        reject(new TurnInterrupted());
      };
      this.abort.signal.addEventListener("abort", onAbort, { once: true });
    });
  }
}
