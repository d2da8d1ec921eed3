import { createScriptedHostAdapter, type ScriptedHostAdapter, type ScriptStep } from "../../src/index.js";

/**
 * What the SIGKILL loop (kills.test.ts) and its child runtime (killChild.ts) share: the
 * provider's scripts, how its host is configured, the seeded random source, and the lines
 * the child writes on stdout to tell the parent what it was acknowledged.
 */

/** `socket`: a host that outlives the runtime, whose record says its pending requests survive a restart. */
export type KillTransport = "stdio" | "websocket" | "socket";
/** Native steering, or steering by interrupt-restart (a new attempt of the run). */
export type KillSteering = "native" | "restart";

export const KILL_TARGET = "s";

/** A run that waits on an approval nobody gives: pending at every kill after the child's first few events. */
export const PARKED_TEXT = "[ask] parked";

const long = (word: string, n: number) => Array.from({ length: n }, (_, i) => `${word}${i}`).join(" ");

export const KILL_SCRIPTS: Record<string, ScriptStep[]> = {
  "[stream]": [
    { type: "reasoning", text: "thinking it over" },
    { type: "text", text: long("chunk", 60), chunkSize: 8 },
  ],
  "[ask]": [
    { type: "text", text: "I need to run a command." },
    { type: "command", command: "rm -rf build", output: "removed", approval: true },
    { type: "text", text: long("after", 12), chunkSize: 6 },
  ],
  "[question]": [
    { type: "text", text: "One question first." },
    {
      type: "question",
      questions: [{ id: "q1", question: "Which colour?", options: [{ label: "red" }, { label: "blue" }] }],
    },
  ],
  "[change]": [
    { type: "tool", name: "search", input: { q: "x" }, output: "found" },
    { type: "todo", items: [{ text: "edit", status: "in_progress" }] },
    { type: "file_change", path: "notes.txt", diff: "+note", approval: true },
    { type: "text", text: "changed" },
  ],
};

/** The prompt markers the child's messages pick from ("" is the provider's echo). */
export const KILL_MARKERS = ["[stream]", "[ask]", "[question]", "[change]", ""] as const;

export function killAdapter(transport: KillTransport, steering: KillSteering): ScriptedHostAdapter {
  const survives = transport === "socket";
  return createScriptedHostAdapter({
    transport,
    capabilities: {
      ...(steering === "restart" ? { turns: { supportsActiveSteering: false } } : {}),
      ...(survives ? { sessions: { pendingRequestsSurviveRestart: true } } : {}),
      ...(survives ? { approvals: { approvalCallbacksAreLiveOnly: false } } : {}),
    },
    scripts: KILL_SCRIPTS,
    chunkDelayMs: 1,
  });
}

/** mulberry32: a small seeded generator, so a failing round replays from its logged seed. */
export function seededRandom(seed: number): {
  next(): number;
  int(min: number, max: number): number;
  pick<T>(items: readonly T[]): T;
  weighted<T>(items: ReadonlyArray<readonly [T, number]>): T;
} {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (min: number, max: number) => min + Math.floor(next() * (max - min + 1));
  return {
    next,
    int,
    pick: (items) => items[Math.floor(next() * items.length)]!,
    weighted: (items) => {
      const total = items.reduce((sum, [, w]) => sum + w, 0);
      let at = next() * total;
      for (const [item, w] of items) if ((at -= w) < 0) return item;
      return items.at(-1)![0];
    },
  };
}

/** One line of the child's stdout (JSON). */
export type ChildLine =
  /** A durable record its subscriber received. */
  | { t: "ack"; record: { seq: number; at: string; event: { type: string } & Record<string, unknown> } }
  /** A command that resolved: what was asked and the receipt returned. */
  | {
      t: "receipt";
      command: "createThread" | "sendMessage" | "interrupt" | "respond";
      input: Record<string, unknown>;
      receipt: Record<string, unknown>;
    }
  /** A host process its sessions run in (pid and kernel start time). */
  | { t: "host"; pid: number; startTime: string | null }
  /** A command refused with a typed error (expected under chaos: conflicts, expired requests). */
  | { t: "refused"; command: string; code: string }
  /** A host process was just forked (the child then blocks until it is killed: `at-host-spawn`). */
  | { t: "spawned"; pid: number }
  /** Something that must not happen: an untyped error or a failure reported through onFailure. */
  | { t: "fault"; message: string };
