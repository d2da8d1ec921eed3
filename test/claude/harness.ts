import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  createClaudeAdapter,
  type ClaudeAdapter,
  type ClaudeAdapterOptions,
} from "../../src/adapters/claude/adapter.js";
import { lastPrompt, type TranscriptEntry } from "../../src/adapters/claude/mapper.js";
import { Projections } from "../../src/runtime/projections.js";
import { until } from "../support/runtime.js";
import type { RuntimeOptions } from "../../src/index.js";
import type { ModelSimulator } from "../../src/simulator/index.js";
import { simulatedWorld, type SimulatedWorld } from "../providers/world.js";

/**
 * Claude Code (the binary the pinned Agent SDK ships) against the model simulator's Messages
 * dialect on 127.0.0.1 (the adapter's `model` option), with a temporary HOME, Claude config directory and workspace,
 * and the telemetry and non-essential-traffic opt-outs.
 */
export type ClaudeWorld = SimulatedWorld<ClaudeAdapter>;

/** Where the tests keep the simulator's API key (any will do): the adapter reads it from this variable. */
export const SIMULATOR_KEY_ENV = "TILLER_TEST_SIMULATOR_KEY";
export const SIMULATOR_KEY = "sk-simulator-key";

/**
 * `adapter`: extra adapter options (an `executable` such as the transcript recorder, its `env`, the name of the model
 * Claude asks the simulator for).
 */
export function claudeWorld(
  runtime: Partial<RuntimeOptions> = {},
  adapter: Omit<ClaudeAdapterOptions, "model"> & { model?: { name?: string } } = {},
  simulator?: () => Promise<ModelSimulator>,
): Promise<ClaudeWorld> {
  return simulatedWorld({
    target: "claude",
    ...(simulator ? { simulator } : {}),
    runtime,
    makeAdapter: ({ home }, sim) => {
      process.env[SIMULATOR_KEY_ENV] = SIMULATOR_KEY;
      return createClaudeAdapter({
        ...adapter,
        home,
        configDir: join(home, ".claude"),
        model: { baseUrl: sim.url, apiKeyEnv: SIMULATOR_KEY_ENV, ...adapter.model },
      });
    },
  });
}

export { until };

/**
 * The thread's Claude transcript as it stands on disk, main chain only (the shape the host reads with
 * getSessionMessages).
 */
function transcriptOnDisk(w: ClaudeWorld, threadId: string): TranscriptEntry[] {
  const cursor = w.rt.views.providerThreads.get(Projections.providerThreadKey(threadId, "claude"))?.resumeCursor;
  const projects = join(w.home, ".claude", "projects");
  if (!cursor || !existsSync(projects)) return [];
  for (const project of readdirSync(projects)) {
    const file = join(projects, project, `${cursor}.jsonl`);
    if (!existsSync(file)) continue;
    return readFileSync(file, "utf8")
      .split("\n")
      .flatMap((line) => {
        try {
          const entry = JSON.parse(line) as {
            type: TranscriptEntry["type"];
            uuid: string;
            isSidechain?: boolean;
            message?: unknown;
          };
          return entry.isSidechain || (entry.type !== "user" && entry.type !== "assistant")
            ? []
            : [{ type: entry.type, uuid: entry.uuid, parent_tool_use_id: null, message: entry.message }];
        } catch {
          return []; // the line Claude is writing right now
        }
      });
  }
  return [];
}

/**
 * Resolves once Claude has written `prompt` down as the thread's last prompt, `times` times in all (and, with
 * `answered`, an answer after it). Claude writes its transcript a little after it acts on it: a test that kills Claude
 * waits for this first, so what the host finds on disk afterwards does not depend on how fast the machine is.
 */
export async function untilWrittenDown(
  w: ClaudeWorld,
  threadId: string,
  prompt: string,
  { answered = false, times = 1 } = {},
): Promise<void> {
  await until(`Claude to write down "${prompt}" (${times}x)${answered ? " and its answer" : ""}`, () => {
    const entries = transcriptOnDisk(w, threadId);
    const written = entries.filter((e) => e.type === "user" && lastPrompt([e]) === prompt).length;
    if (lastPrompt(entries) !== prompt || written < times) return false;
    const at = entries.findLastIndex((e) => e.type === "user" && lastPrompt([e]) === prompt);
    return !answered || entries.slice(at + 1).some((e) => e.type === "assistant");
  });
}

/** The Claude Code processes a world's hosts run (their children), by pid. */
export function claudeProcesses(w: ClaudeWorld): number[] {
  const hosts = new Set(
    [...w.rt.views.sessions.keys()].map((id) => w.adapter.hostPid(id)).filter((p): p is number => p !== null),
  );
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, so read after the last ")".
        const ppid = Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(")").at(-1)!.trim().split(" ")[1]);
        return hosts.has(ppid);
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}

/** The permission mode each running Claude process was started under, as its command line says. */
export function permissionModes(w: ClaudeWorld): string[] {
  return claudeProcesses(w).map((pid) => {
    const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    const at = args.findIndex((a) => a.startsWith("--permission-mode"));
    return at < 0 ? "(none)" : args[at]!.includes("=") ? args[at]!.split("=")[1]! : args[at + 1]!;
  });
}
