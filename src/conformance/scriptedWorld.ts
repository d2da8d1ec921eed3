import type { ProviderAdapter } from "../adapters/contract.js";
import {
  createScriptedAdapter,
  ScriptedBackend,
  type CapabilityOverrides,
  type ProviderCapabilities,
  type ScriptedAdapterOptions,
  type ScriptStep,
} from "../index.js";
import type { BehaviourKind, ConformanceWorld, TurnBehaviour, TurnEvidence, WorldRun } from "./world.js";

/**
 * The world of the scripted provider, and the worked example of a world: its provider runs in process, so each
 * behaviour becomes the script of one turn, and the provider's evidence is read from its own backend (the
 * conversation each turn was taken up in, the steer acknowledgements its turn wrote).
 */

export interface ScriptedWorldOptions {
  /** The record the scripted provider is given (it honours whatever it is given): full, or overrides of the full. */
  capabilities?: ProviderCapabilities | CapabilityOverrides;
  /** Name in the report (default `scripted`). */
  name?: string;
  /**
   * The adapter factory (default `createScriptedAdapter`): wrap it to test the suite itself, e.g. with an adapter
   * that claims more than it does.
   */
  adapter?: (options: ScriptedAdapterOptions) => ProviderAdapter;
}

/** A turn as the scripted provider keeps it. */
type BackendTurn = NonNullable<ReturnType<ScriptedBackend["threads"]["get"]>>["turns"][number];

const SCRIPTS: BehaviourKind[] = [
  "text",
  "hold",
  "approval:command",
  "approval:file_change",
  "approval:file_read",
  "approval:apply_patch",
  "plan",
  "todo",
  "proposed_plan",
  "question",
  "subagent",
  "tool",
  "mcp",
  "dynamic_tool",
];

function stepsOf(behaviour: TurnBehaviour): ScriptStep[] {
  const reply: ScriptStep = { type: "text", text: behaviour.text };
  switch (behaviour.kind) {
    case "text":
      return [reply];
    case "hold":
      return [reply, { type: "gate", name: behaviour.gate }, { type: "text", text: " (released)" }];
    case "approval":
      if (behaviour.approval === "command")
        return [{ type: "command", command: "echo conformance", output: "conformance\n", approval: true }, reply];
      if (behaviour.approval === "file_change")
        return [{ type: "file_change", path: "conformance.txt", diff: "+conformance", approval: true }, reply];
      if (behaviour.approval === "apply_patch")
        return [
          { type: "file_change", path: "conformance.txt", diff: "+conformance", approval: true, patch: true },
          reply,
        ];
      return [{ type: "file_read", path: "conformance.txt", approval: true }, reply];
    case "plan":
      return [
        {
          type: "plan",
          steps: [
            { step: "look", status: "completed" },
            { step: "edit", status: "in_progress" },
          ],
        },
        reply,
      ];
    case "todo":
      return [{ type: "todo", items: [{ text: "edit", status: "in_progress" }] }, reply];
    case "proposed_plan":
      return [{ type: "proposed_plan", text: "build, then test" }, reply];
    case "question":
      return [{ type: "question", questions: [{ id: "go", question: "go on?" }] }, reply];
    case "tool":
      return [
        { type: "reasoning", text: "thinking it over" },
        { type: "command", command: "echo conformance", output: behaviour.output },
        reply,
      ];
    case "mcp":
      return [
        {
          type: "tool",
          name: behaviour.tool,
          output: "found",
          mcp: { server: behaviour.server, tool: behaviour.tool },
        },
        reply,
      ];
    case "dynamic_tool":
      return [{ type: "tool_call", tool: behaviour.tool, input: { say: "hello" } }, reply];
    case "subagent": {
      const child: ScriptStep[] = [{ type: "text", text: "the subagent works" }];
      if (behaviour.ask) child.push({ type: "command", command: "echo sub", output: "sub\n", approval: true });
      if (behaviour.gate) child.push({ type: "gate", name: behaviour.gate });
      return [{ type: "subagent", agent: "helper", prompt: behaviour.prompt, steps: child }, reply];
    }
  }
}

/** The steers a scripted turn acknowledged: it writes `(steered: <text>) ` into its reply for each. */
function steersIn(assistantText: string): string[] {
  return [...assistantText.matchAll(/\(steered: (.*?)\) /g)].map((m) => m[1]!);
}

export function scriptedWorld(options: ScriptedWorldOptions = {}): ConformanceWorld {
  const factory = options.adapter ?? createScriptedAdapter;
  return {
    name: options.name ?? "scripted",
    scripts: new Set(SCRIPTS),
    // In process, each path on a backend of its own: paths run side by side.
    parallel: 4,
    async open(): Promise<WorldRun> {
      // One backend per path: every adapter of the path (a restart's too) reaches the same conversations.
      const backend = new ScriptedBackend();
      // Behaviours by the user text of the turn they are for (a queued turn may run after a later one is sent).
      const behaviours = new Map<string, TurnBehaviour>();
      /** Every turn the provider took up, in order, as it saw it then (its record goes on changing as it runs). */
      const taken: Array<{ text: string; priorUserTexts: string[]; concurrent: string[]; record: BackendTurn | null }> =
        [];
      const evidence = ({ text, priorUserTexts, concurrent, record }: (typeof taken)[number]): TurnEvidence => {
        const context = record?.context ? { text: record.context.text, delivery: record.context.delivery } : null;
        const steers = steersIn(record?.assistantText ?? "");
        // The scripted provider keeps each turn's model and mode.
        return {
          text,
          priorUserTexts,
          steers,
          context,
          concurrent,
          ...(record && record.model !== undefined ? { model: record.model } : {}),
          ...(record?.runtimeMode ? { runtimeMode: record.runtimeMode } : {}),
        };
      };
      return {
        adapter: () =>
          factory({
            capabilities: options.capabilities ?? {},
            backend,
            script: ({ text }) => {
              // The provider's own view: the thread this turn was taken up in, and what it held before it.
              const thread = [...backend.threads.values()].find(
                (t) => t.turns.at(-1)?.status === "running" && t.turns.at(-1)?.userText === text,
              );
              const turns = thread?.turns ?? [];
              const earlier = turns.slice(0, -1);
              taken.push({
                text,
                priorUserTexts: earlier.map((t) => t.userText),
                concurrent: earlier.filter((t) => t.status === "running").map((t) => t.userText),
                record: turns.at(-1) ?? null,
              });
              const behaviour = behaviours.get(text);
              return behaviour ? stepsOf(behaviour) : [{ type: "text", text: "(no behaviour for this turn)" }];
            },
          }),
        next: (behaviour, { userText }) => void behaviours.set(userText, behaviour),
        release: (gate) => backend.openGate(gate),
        lastTurn: () => (taken.length > 0 ? evidence(taken.at(-1)!) : null),
        turns: () => taken.map(evidence),
        async close() {},
      };
    },
  };
}
