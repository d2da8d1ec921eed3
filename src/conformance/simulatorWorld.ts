import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ProviderAdapter } from "../adapters/contract.js";
import { contextHeader } from "../adapters/kit/index.js";
import { startModelSimulator, type ReplySpec, type SimulatorRequest, type ToolCallSpec } from "../simulator/index.js";
import type { ApprovalKind, BehaviourKind, ConformanceWorld, TurnBehaviour, TurnEvidence, WorldRun } from "./world.js";

/**
 * The world of any provider whose model is reached over HTTP: each path starts the model simulator
 * (`tiller-runtime/simulator`: the OpenAI Responses, Anthropic Messages and Gemini dialects) on 127.0.0.1 and a
 * temporary HOME, and every adapter of the path (a runtime restart's too) is made by the world's `adapter` pointed at
 * both, so it reaches the same conversations. An adapter author writes the adapter and how its model's tool calls are
 * spelled (`tools`); the world does the rest.
 *
 * Behaviours are keyed by the user text of the turn they are for: every model request is answered from the latest
 * user text the provider sent and from what the provider did after it (a tool result is a step: the reply of the
 * next step comes), so a side request, a steer's extra request or a resumed thread's replayed history never consumes
 * another turn's reply. A subagent's requests are told apart by their conversation's first user text: the prompt its
 * parent gave it.
 *
 * The evidence is what the provider sent the model in its latest turn request: the turn's own user text (the last
 * one of the turn's first request), the user texts before it, the explicit context it carried (under the kit's context
 * header: a user text before the user's own, or in the same text, as `userPrompt` writes it, is `synthetic_user`; a
 * `system` or `developer` message is that delivery, and so are the request's own instructions), the model it named.
 * Where the provider's requests name the turn they belong to (`evidence.turnKey`), the user texts a later request of
 * the same turn adds are the turn's steers; else the world reads no steer (a provider without native steering).
 */

/** What every adapter of one path is pointed at. */
export interface SimulatorProvider {
  /** The simulator, `http://127.0.0.1:PORT` (no trailing slash): `POST /v1/messages`, `POST /v1/responses`. */
  baseUrl: string;
  /** The environment variable holding the simulator's key (it takes any key), set in `env`. */
  apiKeyEnv: string;
  /** What the provider's process needs in its environment: the key. */
  env: Record<string, string>;
  /** The path's temporary HOME: the provider's own state (its config, its conversations on disk) goes under it. */
  home: string;
}

/** Where a step's reply is being made. */
export interface StepContext {
  /** The model request being answered. */
  request: SimulatorRequest;
  /** What the turn says in the end. */
  text: string;
  /**
   * A directory outside every working directory and outside HOME (its `read.txt` holds `conformance`): a file the
   * model writes or reads there asks for approval under the runtime's default sandbox (workspace-write).
   */
  outside: string;
}

/**
 * How the provider's model asks for things, in the provider's own tool names and arguments. A behaviour whose tool is
 * not given is not scripted (its fields are reported not exercisable). The artifacts (`plan`, `todo`,
 * `proposed_plan`, `question`) are the model's replies before the turn's text, one a step: each tool result the
 * provider sends back moves the turn to the next.
 */
export interface SimulatorTools {
  /**
   * A shell command that prints `output`; `asks`: one the provider must ask approval for under the default sandbox
   * (its asking output does not matter). Scripts `approval:command`, `tool` and, with `subagent`, a subagent's steps.
   */
  command?(run: { asks: boolean; output: string }, at: StepContext): ToolCallSpec;
  /** A file written in `at.outside` (scripts `approval:file_change`). */
  file_change?(at: StepContext): ToolCallSpec;
  /** `read.txt` read in `at.outside` (scripts `approval:file_read`). */
  file_read?(at: StepContext): ToolCallSpec;
  /** A patch the provider applies itself (scripts `approval:apply_patch`). */
  apply_patch?(at: StepContext): ToolCallSpec;
  /** A two-step plan: `look` completed, `edit` in progress. */
  plan?(at: StepContext): ReplySpec[];
  /** A todo list: `edit` in progress. */
  todo?(at: StepContext): ReplySpec[];
  /** A plan proposed to accept: `build, then test`. */
  proposed_plan?(at: StepContext): ReplySpec[];
  /** One structured question, id (or text) `go`, options `yes` and `no`. */
  question?(at: StepContext): ReplySpec[];
  /** Starts a subagent given `prompt` (scripts `subagent` when `command` is given too). */
  subagent?(prompt: string, at: StepContext): ToolCallSpec;
}

/** How the world reads the provider's evidence from its requests, where the defaults do not fit. */
export interface SimulatorEvidence {
  /** The provider's own user texts (environment notes, reminders: never the user's), skipped. Default: none. */
  ownText?: RegExp;
  /** Whether a request is one of the provider's turns (default: every request with a user text), not a side request. */
  turnRequest?(request: SimulatorRequest): boolean;
  /** The provider turn a request belongs to, where the request names it: a turn's later user texts are its steers. */
  turnKey?(request: SimulatorRequest): string | null;
  /** The mode the provider told the model its turn works in, read from the turn's first request. */
  runtimeMode?(request: SimulatorRequest): TurnEvidence["runtimeMode"];
  /**
   * Where the provider takes a native steer into its running turn and its requests name no turn (no `turnKey`): a
   * steer's text right after the reply (cut short or whole) of a held turn is a steer of that turn. `interrupted` is
   * the provider's marker of a turn it stopped: a user text after it starts a turn of its own.
   */
  steersAfterHeldReply?: { interrupted?: RegExp };
  /** The model a request names, where it is not the body's `model` (Gemini names it in the URL). */
  model?(request: SimulatorRequest): string | null;
}

export interface SimulatorWorldOptions {
  /** The adapter's name in the report. */
  name: string;
  /** An adapter pointed at the path's simulator and HOME; called for every adapter the path needs. */
  adapter(provider: SimulatorProvider): ProviderAdapter;
  tools?: SimulatorTools;
  /** A model the provider takes besides its default (`WorldRun.otherModel`); default: any name goes. */
  otherModel?: string;
  /** The behaviours scripted (default: `text`, `hold`, and those `tools` spells). */
  scripts?: Iterable<BehaviourKind>;
  evidence?: SimulatorEvidence;
}

/** How the kit's context header starts, whatever the context's kind. */
const CONTEXT = contextHeader("handoff").split("(")[0]!;
const KEY_ENV = "TILLER_SIMULATOR_API_KEY";

type Role = "user" | "assistant" | "tool_call" | "tool_result" | "system" | "developer";
/** One text (or tool step) of a request's conversation; `top`: the request's own instructions, outside it. */
interface Entry {
  role: Role;
  text: string;
  top?: boolean;
}
/** A user text of the conversation, at its entry, with the context it carried. */
interface UserText {
  at: number;
  text: string;
  context: TurnEvidence["context"];
}
type Subagent = Extract<TurnBehaviour, { kind: "subagent" }>;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;

/** The texts of a message's content: a string, or parts of a text type. */
function textsOf(content: unknown): string[] {
  if (typeof content === "string") return [content];
  if (!Array.isArray(content)) return [];
  return content.flatMap((part) =>
    isRecord(part) && typeof part.text === "string" && /text/.test(String(part.type ?? "text")) ? [part.text] : [],
  );
}

/** A message's role; any other is the model's (a provider may put its own system messages in the conversation). */
const roleOf = (role: unknown): Role =>
  role === "user" || role === "system" || role === "developer" ? role : "assistant";

/** Anthropic Messages: `system`, then `messages` (tool_use and tool_result blocks are steps). */
function messagesEntries(body: Record<string, unknown>): Entry[] {
  const out: Entry[] = textsOf(body.system).map((text) => ({ role: "system", text, top: true }));
  for (const message of Array.isArray(body.messages) ? body.messages : []) {
    if (!isRecord(message)) continue;
    const role = roleOf(message.role);
    const blocks = typeof message.content === "string" ? [{ type: "text", text: message.content }] : message.content;
    for (const block of Array.isArray(blocks) ? blocks : []) {
      if (!isRecord(block)) continue;
      if (block.type === "tool_result") out.push({ role: "tool_result", text: "" });
      else if (block.type === "tool_use") out.push({ role: "tool_call", text: "" });
      else if (block.type === "text" && typeof block.text === "string") out.push({ role, text: block.text });
    }
  }
  return out;
}

/** OpenAI Responses: `instructions`, then `input` (`*_call` and `*_call_output` items are steps). */
function responsesEntries(body: Record<string, unknown>): Entry[] {
  const out: Entry[] = textsOf(body.instructions).map((text) => ({ role: "system", text, top: true }));
  if (typeof body.input === "string") return [...out, { role: "user", text: body.input }];
  for (const item of Array.isArray(body.input) ? body.input : []) {
    if (!isRecord(item)) continue;
    const type = String(item.type ?? "message");
    if (type.endsWith("_call_output")) out.push({ role: "tool_result", text: "" });
    else if (type.endsWith("_call")) out.push({ role: "tool_call", text: "" });
    else if (type === "message") {
      for (const text of textsOf(item.content)) out.push({ role: roleOf(item.role), text });
    }
  }
  return out;
}

/** Gemini: `systemInstruction`, then `contents` (`functionCall`, `functionResponse` parts are steps; thoughts none). */
function geminiEntries(body: Record<string, unknown>): Entry[] {
  const system = isRecord(body.systemInstruction) ? body.systemInstruction.parts : undefined;
  const out: Entry[] = textsOf(system).map((text) => ({ role: "system", text, top: true }));
  for (const content of Array.isArray(body.contents) ? body.contents : []) {
    if (!isRecord(content)) continue;
    const role: Role = content.role === "user" ? "user" : "assistant";
    for (const part of Array.isArray(content.parts) ? content.parts : []) {
      if (!isRecord(part) || part.thought === true) continue;
      if (isRecord(part.functionResponse)) out.push({ role: "tool_result", text: "" });
      else if (isRecord(part.functionCall)) out.push({ role: "tool_call", text: "" });
      else if (typeof part.text === "string") out.push({ role, text: part.text });
    }
  }
  return out;
}

const ENTRIES: Partial<Record<SimulatorRequest["dialect"], (body: Record<string, unknown>) => Entry[]>> = {
  messages: messagesEntries,
  responses: responsesEntries,
  gemini: geminiEntries,
};

const entriesCache = new WeakMap<SimulatorRequest, Entry[]>();
function entriesOf(request: SimulatorRequest): Entry[] {
  let entries = entriesCache.get(request);
  if (!entries) {
    const body = isRecord(request.body) ? request.body : {};
    entries = ENTRIES[request.dialect]?.(body) ?? [];
    entriesCache.set(request, entries);
  }
  return entries;
}

export function simulatorWorld(options: SimulatorWorldOptions): ConformanceWorld {
  const tools = options.tools ?? {};
  const evidence = options.evidence ?? {};
  const scripts = new Set<BehaviourKind>(options.scripts ?? scriptsOf(tools));
  return {
    name: options.name,
    scripts,
    async open(): Promise<WorldRun> {
      const root = await mkdtemp(join(tmpdir(), `tiller-conformance-${options.name.replace(/[^\w-]+/g, "-")}-`));
      const home = join(root, "home");
      const outside = join(root, "outside");
      await mkdir(home);
      await mkdir(outside);
      await writeFile(join(outside, "read.txt"), "conformance\n");
      /** The turns' behaviours, by the user text of the turn each is for. */
      const behaviours = new Map<string, TurnBehaviour>();
      const released = new Set<string>();
      /** The texts of steers (a turn of their own only where the runtime restarts a run with one). */
      const steerTexts = new Set<string>();
      /** The subagent behaviours, by the prompt their subagent is given. */
      const subagents = new Map<string, Subagent>();

      /** The user's texts in the request's conversation, each with the context it carried. */
      function userTexts(request: SimulatorRequest): UserText[] {
        const entries = entriesOf(request);
        const out: UserText[] = [];
        let context: TurnEvidence["context"] = null;
        entries.forEach((entry, at) => {
          if (entry.top) return;
          if (entry.role === "system" || entry.role === "developer") {
            const from = entry.text.indexOf(CONTEXT);
            if (from >= 0) context = { text: entry.text.slice(from), delivery: entry.role };
            return;
          }
          if (entry.role !== "user" || evidence.ownText?.test(entry.text)) return;
          if (!entry.text.startsWith(CONTEXT)) {
            out.push({ at, text: entry.text, context });
            context = null;
            return;
          }
          // Context in the same text as the user's own (`userPrompt`), or a message of its own before it.
          const own = [...behaviours.keys()]
            .filter((text) => entry.text.endsWith(`\n\n${text}`))
            .sort((a, b) => b.length - a.length)[0];
          const text = own === undefined ? entry.text : entry.text.slice(0, -own.length - 2);
          context = { text, delivery: "synthetic_user" };
          if (own === undefined) return;
          out.push({ at, text: own, context });
          context = null;
        });
        // The request's own instructions are its latest turn's.
        const top = entries.find((e) => e.top && e.text.includes(CONTEXT));
        const latest = out.at(-1);
        if (top && latest) latest.context = { text: top.text.slice(top.text.indexOf(CONTEXT)), delivery: "system" };
        return out;
      }

      const stepOf = (request: SimulatorRequest, user: UserText) =>
        entriesOf(request)
          .slice(user.at + 1)
          .filter((e) => e.role === "tool_result").length;
      const answered = (request: SimulatorRequest, user: UserText) =>
        entriesOf(request)
          .slice(user.at + 1)
          .some((e) => e.role === "assistant");
      const call = (tool: ToolCallSpec, text?: string): ReplySpec => ({ tools: [tool], ...(text ? { text } : {}) });

      /** A subagent says something, then asks (`ask`) or holds at its gate, and ends. */
      function subagentReply(behaviour: Subagent, step: number, at: StepContext): ReplySpec {
        const said = "the subagent works";
        const command = tools.command!;
        if (behaviour.ask) return step > 0 ? { text: said } : call(command({ asks: true, output: "sub" }, at), said);
        if (!behaviour.gate) return { text: said };
        // It says something in a message that ends (with a command that asks nothing), then holds its next one.
        if (step === 0) return call(command({ asks: false, output: "waiting" }, at), said);
        return released.has(behaviour.gate) || step > 1 ? { text: "done" } : { hang: true, text: "done" };
      }

      /** The replies of the behaviour's steps before its text, and its text's reply. */
      function stepsOf(behaviour: TurnBehaviour, at: StepContext): { steps: ReplySpec[]; last: ReplySpec } {
        const last = { text: behaviour.text };
        const missing = (what: string) => ({ steps: [], last: { text: `(${options.name} world: no ${what})` } });
        switch (behaviour.kind) {
          case "approval": {
            const kind: ApprovalKind = behaviour.approval;
            const asking =
              kind === "command" ? tools.command && tools.command({ asks: true, output: "" }, at) : tools[kind]?.(at);
            return asking ? { steps: [call(asking)], last } : missing(`${kind} approval`);
          }
          case "tool": {
            if (!tools.command) return missing("command");
            const run = tools.command({ asks: false, output: behaviour.output }, at);
            return { steps: [call(run)], last: { reasoning: "thinking it over", text: behaviour.text } };
          }
          case "subagent": {
            if (!tools.subagent) return missing("subagent");
            subagents.set(behaviour.prompt, behaviour);
            return { steps: [call(tools.subagent(behaviour.prompt, at))], last };
          }
          case "plan":
          case "todo":
          case "proposed_plan":
          case "question": {
            const spell = tools[behaviour.kind];
            return spell ? { steps: spell(at), last } : missing(behaviour.kind);
          }
          default:
            return { steps: [], last };
        }
      }

      function replyFor(request: SimulatorRequest): ReplySpec {
        const texts = userTexts(request);
        const user = texts.at(-1);
        const at = (text: string): StepContext => ({ request, text, outside });
        const sub = texts[0] && subagents.get(texts[0].text);
        if (sub && user) return subagentReply(sub, stepOf(request, user), at(sub.text));
        const behaviour = user && behaviours.get(user.text);
        if (!user || !behaviour) return { text: "(no behaviour for this turn)" };
        if (behaviour.kind === "hold")
          // A released gate (or a stream already answered once) is not held again.
          return released.has(behaviour.gate) || answered(request, user)
            ? { text: behaviour.text }
            : { hang: true, text: behaviour.text };
        const step = stepOf(request, user);
        const { steps, last } = stepsOf(behaviour, at(behaviour.text));
        return steps[step] ?? last;
      }

      /**
       * The turn of a request whose latest user texts were steered in (`steersAfterHeldReply`): its own text, and the
       * steers after it, each a steer's text right after the reply of a held turn, with no interruption between.
       */
      function steeredTurn(request: SimulatorRequest): { own: string; steers: string[] } | null {
        const held = [...behaviours.values()].flatMap((b) => (b.kind === "hold" ? [b.text] : []));
        const reply = (text: string) => text !== "" && held.some((h) => h.startsWith(text));
        const marker = evidence.steersAfterHeldReply?.interrupted;
        const entries = entriesOf(request);
        const texts = userTexts(request);
        let own = texts.length - 1;
        while (own > 0 && steerTexts.has(texts[own]!.text)) {
          const between = entries.slice(texts[own - 1]!.at + 1, texts[own]!.at);
          const stopped = marker && between.some((e) => e.role === "user" && marker.test(e.text));
          if (stopped || !between.some((e) => e.role === "assistant" && reply(e.text))) break;
          own -= 1;
        }
        if (own < 0) return null;
        return { own: texts[own]!.text, steers: texts.slice(own + 1).map((t) => t.text) };
      }

      const sim = await startModelSimulator({ sideReply: replyFor }).catch(async (error: unknown) => {
        await rm(root, { recursive: true, force: true });
        throw error;
      });
      const isTurn = (request: SimulatorRequest) => {
        if (request.dialect === "unknown" || !(evidence.turnRequest?.(request) ?? true)) return false;
        const first = userTexts(request)[0];
        return !!first && !subagents.has(first.text);
      };
      const provider: SimulatorProvider = {
        baseUrl: sim.url,
        apiKeyEnv: KEY_ENV,
        env: { [KEY_ENV]: "sk-simulator" },
        home,
      };
      return {
        ...(options.otherModel ? { otherModel: options.otherModel } : {}),
        adapter: () => options.adapter({ ...provider, env: { ...provider.env } }),
        next: (behaviour, { userText, steer }) => {
          behaviours.set(userText, behaviour);
          if (steer) steerTexts.add(userText);
        },
        release: (gate) => {
          released.add(gate);
          sim.releaseHang();
        },
        lastTurn(): TurnEvidence | null {
          const requests = sim.requests.filter(isTurn);
          const latest = requests.at(-1);
          if (!latest) return null;
          const key = evidence.turnKey?.(latest) ?? null;
          const steered = key === null && evidence.steersAfterHeldReply ? steeredTurn(latest) : null;
          const first =
            key !== null
              ? (requests.find((r) => evidence.turnKey!(r) === key) ?? latest)
              : steered
                ? (requests.find((r) => userTexts(r).at(-1)?.text === steered.own) ?? latest)
                : latest;
          const opening = userTexts(first);
          const own = opening.at(-1)!;
          const steers =
            key !== null ? userTexts(latest).flatMap((t) => (t.at > own.at ? [t.text] : [])) : (steered?.steers ?? []);
          const mode = evidence.runtimeMode?.(first);
          return {
            text: own.text,
            priorUserTexts: opening.slice(0, -1).map((t) => t.text),
            steers,
            context: own.context,
            model: evidence.model
              ? evidence.model(first)
              : isRecord(first.body) && typeof first.body.model === "string"
                ? first.body.model
                : null,
            ...(mode ? { runtimeMode: mode } : {}),
          };
        },
        async close() {
          await sim.close();
          await rm(root, { recursive: true, force: true, maxRetries: 10 });
        },
      };
    },
  };
}

/** `text` and `hold`, and each behaviour the tools spell. */
function scriptsOf(tools: SimulatorTools): BehaviourKind[] {
  const out: BehaviourKind[] = ["text", "hold"];
  if (tools.command) out.push("approval:command", "tool");
  for (const kind of ["file_change", "file_read", "apply_patch"] as const)
    if (tools[kind]) out.push(`approval:${kind}`);
  for (const kind of ["plan", "todo", "proposed_plan", "question"] as const) if (tools[kind]) out.push(kind);
  if (tools.subagent && tools.command) out.push("subagent");
  return out;
}
