import type { ProviderCapabilities } from "../../../capabilities/schema.js";
import type { ItemStatus, ItemStream, ProviderItemKind } from "../../../domain/items.js";
import type { ProviderEvent } from "../../contract.js";
import type { ScriptedBackend } from "./backend.js";
import { ChunkPauses, type StreamPace } from "./turnWaits.js";

/**
 * A scripted turn's items on the event stream: started, streamed and completed only as far
 * as the capability record says the provider reports them, with ids only where identity
 * exposes them.
 */

export type Emit = (event: ProviderEvent) => void;
/** Where nested events go: the child thread's ref, or the parent item they hang under. */
export interface Scope {
  threadRef: string | undefined;
  parentItemRef: string | undefined;
  inSubagent: boolean;
}

export class TurnItems {
  /** The top-level assistant text so far (a subagent's text is not the turn's answer). */
  assistantText = "";
  #itemCounter = 0;
  readonly #pauses: ChunkPauses;

  constructor(
    private readonly turnRef: string | undefined,
    private readonly caps: ProviderCapabilities,
    private readonly backend: ScriptedBackend,
    private readonly emit: Emit,
    signal: AbortSignal,
    private readonly pace: StreamPace,
  ) {
    this.#pauses = new ChunkPauses(signal);
  }

  async message(
    kind: "assistant_message" | "reasoning",
    text: string,
    scope: Scope,
    chunkSize?: number,
  ): Promise<void> {
    const ref = this.itemRef(false);
    const { streaming } = this.caps;
    this.started(kind, ref, scope, undefined);
    const streams = kind === "assistant_message" ? streaming.streamsAssistantText : streaming.streamsReasoning;
    if (streams) await this.stream(kind, ref, scope, text, "text", chunkSize);
    if (kind === "assistant_message" && !scope.inSubagent) this.assistantText += text;
    if (kind === "reasoning" || streaming.emitsMessageCompleted || !streams) {
      this.completed(kind, ref, scope, { status: "completed", text });
    }
  }

  async stream(
    kind: ProviderItemKind,
    itemRef: string | undefined,
    scope: Scope,
    text: string,
    stream: ItemStream,
    chunkSize = 12,
  ): Promise<void> {
    if (stream === "output" && !this.#streamsToolOutput()) return;
    const where = this.where(scope);
    await this.#pauses.stream(Math.ceil(text.length / chunkSize), this.pace, (chunk) =>
      this.emit({
        type: "item.delta",
        ...where,
        itemRef,
        kind,
        stream,
        delta: text.slice(chunk * chunkSize, (chunk + 1) * chunkSize),
      }),
    );
  }

  started(
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
      ...this.where(scope),
      itemRef,
      parentItemRef,
      kind,
      ...(detail ? { detail } : {}),
    });
  }

  completed(
    kind: ProviderItemKind,
    itemRef: string | undefined,
    scope: Scope,
    fields: { status: ItemStatus; text?: string; output?: string; exitCode?: number },
  ): void {
    const isTool = kind !== "assistant_message" && kind !== "reasoning";
    if (isTool && !this.caps.tools.emitsToolCompleted) return;
    // A provider without tool output reports none, not even at the tool's completion.
    const { output, ...rest } = fields;
    const reported = output !== undefined && this.caps.tools.emitsToolOutput ? { ...rest, output } : rest;
    this.emit({ type: "item.completed", ...this.where(scope), itemRef, kind, ...reported });
  }

  /** A tool's output streams only from a provider that both reports tool output and streams it. */
  #streamsToolOutput(): boolean {
    return this.caps.tools.emitsToolOutput && this.caps.streaming.streamsToolOutput;
  }

  itemRef(isTool: boolean): string | undefined {
    const { identity, tools } = this.caps;
    if (identity.nativeItemIds === "none" || (isTool && !tools.exposesToolItemIds)) return undefined;
    this.#itemCounter += 1;
    // Weak ids are only unique within a turn (they restart every turn), as weak ids do.
    return identity.nativeItemIds === "weak" ? `item-${this.#itemCounter}` : this.backend.nextId("sitem");
  }

  /** Plan and todo updates carry item ids only when the provider says its plan deltas do. */
  planRef(): string | undefined {
    return this.caps.planning.planDeltasHaveItemIds ? this.itemRef(false) : undefined;
  }

  where(scope: Scope): { threadRef?: string; turnRef?: string } {
    const where: { threadRef?: string; turnRef?: string } = {};
    if (scope.threadRef) where.threadRef = scope.threadRef;
    if (this.turnRef && !scope.inSubagent) where.turnRef = this.turnRef;
    return where;
  }
}
