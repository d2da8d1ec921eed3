import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAcpAdapter, type AcpAdapter, type AcpAdapterOptions } from "../../src/adapters/acp/adapter.js";
import type { FrameRing } from "../../src/adapters/kit/ring.js";
import { sequentialIds, type RuntimeOptions } from "../../src/index.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { openRuntime } from "../support/internals.js";

/**
 * The stand-in ACP agent (fakeAgent.mjs) under the real ACP adapter and the real runtime: the adapter starts it as any
 * agent (`node fakeAgent.mjs`, its script named in its environment), and the test reads what the client sent it from
 * its log.
 */

/**
 * One thing the agent does; `$id`, `$idString`, `$session` and `$n` in a value are the prompt's id (as sent, and as a
 * string), its session, its number (counted across the agent's lives).
 */
export type Action =
  | { send: Record<string, unknown> }
  | { raw: string }
  | { reply: unknown }
  | { replyError: { code: number; message: string; data?: unknown } }
  | { update: Record<string, unknown> }
  | { text: string }
  | {
      permission: {
        id: unknown;
        sessionId?: string;
        toolCall: Record<string, unknown>;
        options?: Array<{ optionId: string; name: string; kind: string }>;
      };
    }
  | { withdraw: unknown }
  | { group: Action[] }
  | { sleep: number }
  | { waitReply: unknown; count?: number }
  | { waitMethod: string }
  | { exit: number }
  | { kill: NodeJS.Signals }
  | { flood: number };

export interface FakeScript {
  /** What the agent does at once, before it reads anything. */
  startup?: Action[];
  /** Its answer to `initialize` (default: protocol version 1, `loadSession`). */
  initialize?: Action[];
  /** Its answer to `session/new` (default: `{ sessionId: "s<n>" }`). */
  newSession?: Action[];
  /** Its actions for the n-th `session/prompt` (the last one repeats; default: `end_turn` at once). */
  prompts?: Action[][];
  /** A `session/cancel` ends its session's prompt at once (`cancelled`), as a real agent does; else the script does. */
  autoCancel?: boolean;
}

/** A line the agent read (`in`: what the client sent) or wrote. */
export interface LogEntry {
  d: "in" | "out";
  line: string;
  t: number;
}

export const FAKE_AGENT = join(import.meta.dirname, "fakeAgent.mjs");
export const TARGET = "fake";

export interface FakeWorld {
  root: string;
  adapter: AcpAdapter;
  /** The rings of the agent processes started so far (the registry's, as the adapter's connect was handed them). */
  rings: FrameRing[];
  /** The runtime (after `open`). */
  rt: Runtime;
  open(options?: Partial<RuntimeOptions>): Promise<Runtime>;
  /** The agent's log: every line, in order. */
  log(): LogEntry[];
  /** What the client sent, parsed (lines that are not JSON are left out). */
  sent(): Array<Record<string, any>>;
  /** The client's replies to the agent's request `id` (compared strictly: 7 is not "7"). */
  repliesTo(id: unknown): Array<Record<string, any>>;
  /** The last agent process's pid (from its pid file). */
  agentPid(): number | null;
  cleanup(): Promise<void>;
}

/** A world for one test: a temporary directory with the script, the adapter, and (after `open`) the runtime. */
export async function fakeWorld(script: FakeScript, adapter: Partial<AcpAdapterOptions> = {}): Promise<FakeWorld> {
  const root = await mkdtemp(join(tmpdir(), "tiller-acp-hostile-"));
  const logFile = join(root, "agent.log");
  const pidFile = join(root, "agent.pid");
  const scriptFile = join(root, "script.json");
  const counterFile = join(root, "prompts.count");
  await writeFile(scriptFile, JSON.stringify({ ...script, log: logFile, pidFile, counterFile }));
  const made = createAcpAdapter({
    agent: { command: process.execPath, args: [FAKE_AGENT], env: { FAKE_ACP_SCRIPT: scriptFile }, cwd: root },
    ...adapter,
  });
  const rings: FrameRing[] = [];
  const connect = made.hostSpec.connect.bind(made.hostSpec);
  made.hostSpec.connect = (spawned, ring) => {
    rings.push(ring);
    return connect(spawned, ring);
  };
  let rt: Runtime | null = null;
  const log = (): LogEntry[] =>
    existsSync(logFile)
      ? readFileSync(logFile, "utf8")
          .split("\n")
          .filter((l) => l !== "")
          .map((l) => JSON.parse(l) as LogEntry)
      : [];
  const sent = () =>
    log()
      .filter((e) => e.d === "in")
      .flatMap((e) => {
        try {
          return [JSON.parse(e.line) as Record<string, any>];
        } catch {
          return [];
        }
      });
  const world: FakeWorld = {
    root,
    adapter: made,
    rings,
    get rt() {
      if (!rt) throw new Error("the runtime is not open");
      return rt;
    },
    async open(options = {}) {
      rt = await openRuntime({
        dataDir: join(root, "data"),
        ids: sequentialIds(),
        ...options,
        providers: { [TARGET]: made, ...options.providers },
      });
      return rt;
    },
    log,
    sent,
    repliesTo: (id) => sent().filter((m) => !("method" in m) && m.id === id),
    agentPid: () => (existsSync(pidFile) ? Number(readFileSync(pidFile, "utf8")) : null),
    async cleanup() {
      await rt?.close();
      await rm(root, { recursive: true, force: true, maxRetries: 5 });
    },
  };
  return world;
}

/** A tool call the agent asks permission for: a command. */
export const shell = (toolCallId: string, command: string) => ({
  toolCallId,
  title: command,
  kind: "execute",
  status: "pending",
  rawInput: { command },
});

/** All anomalies a ring counted, summed. */
export const anomalies = (ring: FrameRing): number => Object.values(ring.counts).reduce((a, b) => a + (b ?? 0), 0);
