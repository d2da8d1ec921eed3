import type { ProviderAdapter } from "../adapters/contract.js";

/**
 * A world: how the conformance suite runs one provider offline and scripts what it does. The suite never knows the
 * provider; it asks the world for an adapter, tells it what the provider's next turns must do (`next`), and asks it
 * what the provider really had in context (`lastTurn`): that answer is the provider's own evidence, read on the
 * provider's side of the adapter, so an adapter that claims more than it does is caught.
 *
 * Worlds for the in-process scripted provider script its turns directly (`scriptedWorld`). A world for a real binary
 * starts the model simulator (`tiller-runtime/simulator`) on 127.0.0.1, points the adapter at it (`model: { baseUrl,
 * apiKeyEnv }`) with a temporary HOME and provider home, and turns each behaviour into simulator replies:
 *
 * | behaviour | simulator replies |
 * |---|---|
 * | `text` | `{ text }` |
 * | `hold` | `{ hang: true, text }`; `release` is `sim.releaseHang()`, an interrupt aborts the stream |
 * | `approval` | `{ tools: [<the binary's tool for that action>] }`, then `{ text }` once the tool ran |
 * | `tool` | `{ reasoning, tools: [<a shell command>] }`, then `{ text }` |
 *
 * Its `lastTurn` reads the latest request the binary sent the simulator (`sim.requests`): the user messages of the
 * conversation, a steer as a later user message, the context as the system or developer prompt or a user message.
 * Its `close` stops the simulator and removes the temporary homes.
 */

/** Approval kinds, as the capability record names them (`approvals.supports<Kind>Approval`). */
export type ApprovalKind = "command" | "file_change" | "file_read" | "apply_patch";

/**
 * What one provider turn does. Every turn starts by saying something (`text`, streamed as the provider streams),
 * so the suite can tell the provider has taken the turn up.
 */
export type TurnBehaviour =
  /** Replies `text` and ends. */
  | { kind: "text"; text: string }
  /**
   * Says `text`, then keeps the turn open (a stream that does not end) until `release(gate)` is called or the turn is
   * interrupted; released, it ends normally. A native steer the provider takes while it waits must show in
   * `lastTurn().steers`. A gate never released is a hanging stream that only an interrupt ends.
   */
  | { kind: "hold"; text: string; gate: string }
  /**
   * Asks for approval of an action of kind `approval` (a command, a file change...), then, answered, replies `text`.
   * Where the provider cannot ask (the record says so), it acts under its sandbox and replies.
   */
  | { kind: "approval"; approval: ApprovalKind; text: string }
  /** Optional: updates a structured plan (two steps), then replies `text`. */
  | { kind: "plan"; text: string }
  /** Optional: updates a todo list, then replies `text`. */
  | { kind: "todo"; text: string }
  /** Optional: proposes a plan to accept, then replies `text`. */
  | { kind: "proposed_plan"; text: string }
  /** Optional: asks the user one structured question (id `go`), then, answered, replies `text`. */
  | { kind: "question"; text: string }
  /**
   * Optional: starts a subagent asked `prompt` (its conversation's first user text), which says something, then asks
   * for approval of a command (`ask`) or waits at `gate` (until released, closed or interrupted), and ends; then the
   * parent replies `text`. A provider without subagents runs the subagent's steps in the parent turn.
   */
  | { kind: "subagent"; text: string; prompt: string; gate?: string; ask?: boolean }
  /** Optional: thinks (reasoning), runs a command that asks nothing and prints `output`, then replies `text`. */
  | { kind: "tool"; text: string; output: string }
  /**
   * Optional: calls `tool` of the MCP server `server` (asking nothing), then replies `text`. A provider without MCP
   * tools has no such tool: it replies.
   */
  | { kind: "mcp"; text: string; server: string; tool: string }
  /**
   * Optional: calls back the embedder's tool `tool` (registered with the runtime, offered to the session where the
   * record says the provider calls tools back) and replies `text` with what it answered. Without call-backs, it
   * replies.
   */
  | { kind: "dynamic_tool"; text: string; tool: string };

export type BehaviourKind = TurnBehaviour["kind"] | `approval:${ApprovalKind}`;

/** What the provider had when it took up its latest turn, as the provider itself saw it. */
export interface TurnEvidence {
  /** The user text of the turn (without any context it carried: see `context`). */
  text: string;
  /** The user texts of the earlier turns in the provider's conversation, oldest first (what it remembers). */
  priorUserTexts: string[];
  /** Steer texts the turn received while it ran (native steering), in order; read once the turn has ended. */
  steers: string[];
  /**
   * The explicit context the turn carried (a handoff or fork summary), as the provider received it, and how: as system
   * or developer context, or as synthetic user context. Null when it carried none.
   */
  context: { text: string; delivery: "system" | "developer" | "synthetic_user" } | null;
  /** The model the turn ran with, where the world can tell (undefined: it cannot). */
  model?: string | null;
  /** The mode the turn worked in (plan mode, approval policy), where the world can tell (undefined: it cannot). */
  runtimeMode?: { interaction: "default" | "plan"; approvals: "on_request" | "never" };
  /**
   * Where the world can tell: the user texts of the other turns of the same provider conversation that were still
   * running when the provider took this one up (empty: it was taken up alone, at a turn boundary).
   */
  concurrent?: string[];
}

/** One path's provider: fresh for every path, so paths never see each other's conversations. */
export interface WorldRun {
  /**
   * A model the provider takes besides its default, for the model switch (default `conformance-other-model`: a
   * provider that takes any name). A provider that knows only its own models names one of them.
   */
  readonly otherModel?: string;
  /**
   * An adapter on this run's provider. Called for each of the runtime's two targets when it opens (a conversation
   * switches from one to the other and back), and again for each runtime restart (resume in a new session): every
   * adapter must reach the same provider state (its conversations), as a real provider keeps them on disk.
   */
  adapter(): ProviderAdapter;
  /**
   * Says what the provider's turn for `userText` does, before the message is sent. Behaviours come in the order the
   * turns will: a world may queue them (a simulator's reply queue) or key them by the user text the turn carries (more
   * robust where the provider makes side requests). A steer that restarts a run is a turn of its own: its user text
   * is the steer's (`steer: true`). A native steer is no turn: it goes into the turn it steers (`TurnEvidence.steers`).
   */
  next(behaviour: TurnBehaviour, turn: { userText: string; steer?: boolean }): void;
  /** Lets a `hold` turn waiting at `gate` go on. */
  release(gate: string): void;
  /** The provider's evidence of its latest turn (null: it has taken none). */
  lastTurn(): TurnEvidence | null;
  /**
   * Optional: the provider's evidence of every turn it took up in this path, in the order it took them up (across
   * conversations). Where a world gives it, queued and forked conversations are checked turn by turn (order, none
   * lost, none taken up beside another); without it, only from the latest turn.
   */
  turns?(): TurnEvidence[];
  /** Stops what the world started (processes by pid, temporary directories). */
  close(): Promise<void>;
}

export interface ConformanceWorld {
  /** The adapter's name in the report (`conformance: <name> declared ...`). */
  readonly name: string;
  /**
   * The behaviours this world can script. `text`, `hold` and at least one approval kind the provider supports are
   * expected of every world; a field whose check needs a behaviour the world lacks is reported not exercisable.
   */
  readonly scripts: ReadonlySet<BehaviourKind>;
  /** Opens a fresh provider for one path (before the runtime opens). */
  open(): Promise<WorldRun>;
  /**
   * How many paths the world can run at once (each in its own runtime and provider). Default 1: a world of real
   * binaries runs them one by one; an in-process world can run several.
   */
  readonly parallel?: number;
}
