import type { ProviderCapabilities } from "../../../capabilities/schema.js";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { RuntimeMode, TurnTerminalStatus } from "../../../domain/entities.js";
import type { RequestPayload } from "../../../domain/items.js";
import type { ProviderEvent, SandboxPolicy } from "../../contract.js";
import type { BackendThread, ScriptedBackend } from "./backend.js";
import type { ScriptStep } from "./script.js";
import { type Emit, type Scope, TurnItems } from "./turnItems.js";
import { type PendingRequest, TurnRequests } from "./turnRequests.js";
import { checkAborted, type StreamPace, TurnInterrupted, until, wait } from "./turnWaits.js";
import { callBack, canCallBack, toolDetail } from "../tools.js";

/**
 * One scripted turn in flight. It emits exactly what the capability record declares:
 * refs only where identity exposes them, no approvals the provider cannot ask, no plan
 * or todo artifacts it cannot emit. Its items are emitted by TurnItems (turnItems.ts), its
 * requests held by TurnRequests (turnRequests.ts); every wait gives way to an interrupt
 * (turnWaits.ts).
 */

class TurnFailed extends Error {
  constructor(readonly step: Extract<ScriptStep, { type: "fail" }>) {
    super(step.message);
  }
}

/** A subagent of the turn with a child thread: what `waitForSubagent` and `closeSubagent` reach. */
export interface LiveSubagent {
  /** Stops the subagent's steps (at its next step or wait); its parent turn goes on. */
  readonly close: AbortController;
  /** How it ended, once it has. */
  readonly ended: Promise<TurnTerminalStatus>;
}

/** A turn's terminal when nothing went wrong: completed, or interrupted as asked; its thread reusable. */
export function endedCleanly(status: "completed" | "interrupted") {
  return { status, threadDisposition: "reusable", failureClass: null, message: null, retryable: false } as const;
}

export class ScriptedTurn {
  readonly abort = new AbortController();
  readonly steers: string[] = [];
  /** The turn's subagents with a child thread, by its ref: running, or ended (their `ended` resolved). */
  readonly subagents = new Map<string, LiveSubagent>();
  /** The signal a scope's steps give way to: a subagent's also gives way to its close. */
  readonly #signals = new WeakMap<Scope, AbortSignal>();
  readonly #items: TurnItems;
  readonly #requests: TurnRequests;

  constructor(
    readonly turnRef: string | undefined,
    private readonly caps: ProviderCapabilities,
    private readonly backend: ScriptedBackend,
    private readonly emit: Emit,
    pace: StreamPace,
    /**
     * Where file changes with content are written, under which sandbox policy, in which runtime mode; the embedder's
     * tools its session was offered (by name).
     */
    private readonly workspace: {
      cwd: string | null;
      sandbox: SandboxPolicy;
      runtimeMode?: RuntimeMode;
      tools?: readonly string[];
    } = {
      cwd: null,
      sandbox: "workspace-write",
    },
  ) {
    this.#items = new TurnItems(turnRef, caps, backend, emit, this.abort.signal, pace);
    this.#requests = new TurnRequests(caps, backend, emit, this.abort.signal, (scope) => this.#items.where(scope));
  }

  /** The turn's mode lets it ask before acting (approvals `never`: it acts within the sandbox, unasked). */
  get #asks(): boolean {
    return this.workspace.runtimeMode?.approvals !== "never";
  }

  /** The provider took the turn up (announced it, where its record says it announces turns). */
  announced = false;

  /** Requests waiting for the runtime's answer. */
  get pending(): PendingRequest[] {
    return this.#requests.pending;
  }

  /** The turn's own assistant text so far (not its subagents'). */
  get assistantText(): string {
    return this.#items.assistantText;
  }

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
      return endedCleanly("completed");
    } catch (error) {
      if (error instanceof TurnInterrupted) return endedCleanly("interrupted");
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

  #signal(scope: Scope): AbortSignal {
    return this.#signals.get(scope) ?? this.abort.signal;
  }

  async #step(step: ScriptStep, scope: Scope): Promise<void> {
    checkAborted(this.#signal(scope));
    await this.#applySteers(scope);
    const { caps } = this;
    switch (step.type) {
      case "text":
        return this.#items.message("assistant_message", step.text, scope, step.chunkSize);
      case "reasoning":
        // Streamed, or whole at its completion where the record says reasoning does not stream.
        await this.#items.message("reasoning", step.text, scope);
        return;
      case "tool": {
        const ref = this.#items.itemRef(true);
        this.#items.started("tool_call", ref, scope, toolDetail(step, caps));
        if (caps.tools.emitsToolOutput) await this.#items.stream("tool_call", ref, scope, step.output, "output");
        this.#items.completed("tool_call", ref, scope, {
          status: step.failed ? "failed" : "completed",
          output: step.output,
        });
        return;
      }
      case "tool_call":
        return this.#callBack(step, scope);
      case "command": {
        const ref = this.#items.itemRef(true);
        this.#items.started("command_execution", ref, scope, { command: step.command });
        const asked = step.approval && this.#asks && this.#requests.canAsk("command", scope);
        if (asked && !(await this.#requests.approve({ kind: "command", command: step.command }, ref, scope))) {
          this.#items.completed("command_execution", ref, scope, { status: "declined" });
          return;
        }
        if (caps.streaming.streamsToolOutput)
          await this.#items.stream("command_execution", ref, scope, step.output, "output");
        this.#items.completed("command_execution", ref, scope, {
          status: "completed",
          output: step.output,
          exitCode: step.exitCode ?? 0,
        });
        return;
      }
      case "file_change": {
        const ref = this.#items.itemRef(true);
        this.#items.started("file_change", ref, scope, { path: step.path, diff: step.diff });
        const kind = step.patch ? "apply_patch" : "file_change";
        const asked = step.approval && this.#asks && this.#requests.canAsk(kind, scope);
        const payload: RequestPayload = step.patch
          ? { kind: "apply_patch", patch: step.diff }
          : { kind: "file_change", path: step.path, diff: step.diff };
        // Plan mode changes nothing. Without an approval to ask, the sandbox decides: read-only refuses every write.
        const accepted =
          this.workspace.runtimeMode?.interaction === "plan"
            ? false
            : asked
              ? await this.#requests.approve(payload, ref, scope)
              : this.workspace.sandbox !== "read-only";
        if (accepted && step.content !== undefined) await this.#write(step.path, step.content);
        this.#items.completed("file_change", ref, scope, { status: accepted ? "completed" : "declined" });
        return;
      }
      case "file_read": {
        const ref = this.#items.itemRef(true);
        this.#items.started("tool_call", ref, scope, { toolName: "read_file", path: step.path });
        const asked = step.approval && this.#asks && this.#requests.canAsk("file_read", scope);
        const allowed = !asked || (await this.#requests.approve({ kind: "file_read", path: step.path }, ref, scope));
        this.#items.completed("tool_call", ref, scope, { status: allowed ? "completed" : "declined" });
        return;
      }
      case "question": {
        if (!caps.planning.supportsStructuredQuestions) {
          return this.#items.message("assistant_message", step.questions.map((q) => q.question).join("\n"), scope);
        }
        const response = await this.#requests.ask({ kind: "user_input", questions: step.questions }, undefined, scope);
        const answers = response.kind === "answers" ? response.answers : {};
        return this.#items.message("assistant_message", `Noted: ${JSON.stringify(answers)}`, scope);
      }
      case "todo":
        if (caps.planning.emitsTodoList)
          this.emit({
            type: "todo.updated",
            ...this.#items.where(scope),
            itemRef: this.#items.planRef(),
            items: step.items,
          });
        return;
      case "plan":
        if (caps.planning.emitsPlanUpdated) {
          const explanation = step.explanation === undefined ? {} : { explanation: step.explanation };
          this.emit({
            type: "plan.updated",
            ...this.#items.where(scope),
            itemRef: this.#items.planRef(),
            steps: step.steps,
            ...explanation,
          });
        }
        return;
      case "proposed_plan":
        if (caps.planning.emitsProposedPlan) {
          this.emit({
            type: "plan.proposed",
            ...this.#items.where(scope),
            itemRef: this.#items.planRef(),
            text: step.text,
          });
          return;
        }
        return this.#items.message("assistant_message", step.text, scope);
      case "subagent":
        return this.#subagent(step, scope);
      case "fail":
        throw new TurnFailed(step);
      case "hang":
        return wait(this.#signal(scope), null);
      case "gate":
        return until(this.#signal(scope), this.backend.gateOpened(step.name));
      case "pause":
        return wait(this.#signal(scope), step.ms);
    }
  }

  /**
   * The model calls an embedder's tool: only one its session was offered, from a provider whose record says it calls
   * tools back (else it says it has no such tool). The call is a tool item and a `dynamic_tool` request; the answer is
   * the item's output and goes into the reply.
   */
  async #callBack(step: Extract<ScriptStep, { type: "tool_call" }>, scope: Scope): Promise<void> {
    const { approvals } = this.caps;
    const offered = canCallBack(step.tool, this.caps, this.workspace.tools);
    if (!offered || (scope.inSubagent && !approvals.approvalsCanOriginateFromSubagents))
      return this.#items.message("assistant_message", `I have no tool named ${step.tool}.`, scope);
    const ref = this.#items.itemRef(true);
    const { detail, request } = callBack(step);
    this.#items.started("tool_call", ref, scope, detail);
    const response = await this.#requests.ask(request, ref, scope);
    const result = response.kind === "tool_result" ? response : { output: `${step.tool} was not run`, success: false };
    this.#items.completed("tool_call", ref, scope, {
      status: result.success ? "completed" : "failed",
      output: result.output,
    });
    const reply = result.success ? `${step.tool} returned: ${result.output}` : `${step.tool} failed: ${result.output}`;
    return this.#items.message("assistant_message", reply, scope);
  }

  async #subagent(step: Extract<ScriptStep, { type: "subagent" }>, scope: Scope): Promise<void> {
    const { subagents, turns } = this.caps;
    if (!subagents.supportsSubagents) {
      for (const child of step.steps) await this.#step(child, scope);
      return;
    }
    const itemRef = this.#items.itemRef(false);
    const { identity } = this.caps;
    // The child thread is the provider's own: it holds the subagent's conversation (what a native fork copies).
    const childThread =
      subagents.exposesSubagentThreadIds && identity.nativeThreadIds !== "none"
        ? this.backend.createThread([
            { turnRef: "turn-0", userText: step.prompt, assistantText: "", status: "running" },
          ])
        : undefined;
    const childThreadRef = childThread?.id;
    if (childThread) childThread.parentId = scope.threadRef ?? "";
    const lifecycle = subagents.emitsSubagentLifecycle;
    if (lifecycle)
      this.emit({
        type: "subagent.started",
        ...this.#items.where(scope),
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
    // Only a subagent with a child thread can be addressed, so closed.
    const close = new AbortController();
    let ended: ((status: TurnTerminalStatus) => void) | undefined;
    if (childThreadRef) {
      this.#signals.set(child, AbortSignal.any([this.#signal(scope), close.signal]));
      this.subagents.set(childThreadRef, { close, ended: new Promise((resolve) => (ended = resolve)) });
    }
    const exposesTurnRef = turns.exposesNativeTurnId && identity.nativeTurnIds !== "none";
    const childTurn = childThreadRef
      ? { threadRef: childThreadRef, ...(exposesTurnRef ? { turnRef: this.backend.nextId("sturn") } : {}) }
      : null;
    if (childThread && childTurn?.turnRef) childThread.turns[0]!.turnRef = childTurn.turnRef;
    if (childTurn && turns.emitsTurnStarted) this.emit({ type: "turn.started", ...childTurn });
    let status: TurnTerminalStatus = "completed";
    try {
      for (const s of step.steps) await this.#step(s, child);
    } catch (error) {
      status = error instanceof TurnInterrupted ? "interrupted" : "failed";
      // Closed on its own (closeSubagent): the subagent ends interrupted, its parent turn goes on.
      const closed = close.signal.aborted && !this.#signal(scope).aborted;
      if (!closed) throw error;
    } finally {
      if (childThread && childThreadRef)
        this.#childEnded(childThread, childThreadRef, status, `${step.agent} ${status}`);
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
          ...this.#items.where(scope),
          itemRef,
          childThreadRef,
          status,
          result: `${step.agent} ${status}`,
        });
      ended?.(status); // once its end is on the stream
    }
  }

  /**
   * The child thread keeps the subagent's conversation where the record says it outlives its subagent
   * (`subagents.canForkSubagentThread`); otherwise the provider lets it go.
   */
  #childEnded(thread: BackendThread, ref: string, status: TurnTerminalStatus, result: string): void {
    Object.assign(thread.turns[0]!, { status, assistantText: result });
    if (!this.caps.subagents.canForkSubagentThread) this.backend.threads.delete(ref);
  }

  async #write(path: string, content: string): Promise<void> {
    if (!this.workspace.cwd) return;
    const file = join(this.workspace.cwd, path);
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, content);
  }

  /** A native steer shows up as an acknowledgement in the turn's output, before the next step. */
  async #applySteers(scope: Scope): Promise<void> {
    while (this.steers.length > 0) {
      const text = this.steers.shift()!;
      await this.#items.message("assistant_message", `(steered: ${text}) `, scope);
    }
  }
}
