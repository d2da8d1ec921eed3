/**
 * The Codex scenarios of the closing note measured twice on this machine: driving
 * `codex app-server` on the bare protocol (spawn, initialize, thread/start, turn/start, wait
 * for turn/completed; turn/interrupt) and through Tiller, both against the model simulator.
 * Run: `npx tsx bench/codexBare.ts`. Prints medians of 5; never part of the tests. `bench/startup.ts` imports
 * `codexBare` and `codexThroughTiller`.
 */
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { collaborationMode, threadOpening, turnInput } from "../src/adapters/codex/mapper.js";
import { appServerLaunch, codexSimulatorOptions, installedCodexBinary } from "../src/adapters/codex/transport.js";
import type { ModelSimulator } from "../src/simulator/index.js";
import { startSimulatorInWorker } from "./simulatorWorker.js";
import { codexWorld } from "../test/codex/harness.js";
import { pathToFileURL } from "node:url";
import { compare, median, TEXT_TURNS, throughTiller, timeTextTurns, type Timings } from "./compare.js";

/** A bare `codex app-server`, handshake done and thread started, against its own simulator. */
interface BareCodex {
  sim: ModelSimulator;
  /** Spawn time, and the end of the handshake (performance.now()). */
  spawnedAt: number;
  readyAt: number;
  /** Starts a turn and resolves once it completed. */
  turn(text: string): Promise<void>;
  /** Starts a hanging turn, waits for its first delta, interrupts it: how long until it ended. */
  interrupt(): Promise<number>;
  close(): Promise<void>;
}

async function openBareCodex(): Promise<BareCodex> {
  const sim = await startSimulatorInWorker();
  const root = await mkdtemp(join(tmpdir(), "codex-bare-"));
  await mkdir(join(root, "home"));
  await mkdir(join(root, "codex-home"));
  // The adapter's own command line and environment (the simulator's endpoint as `-c` overrides).
  const { spawn: launch } = appServerLaunch(installedCodexBinary()!, {
    home: join(root, "home"),
    codexHome: join(root, "codex-home"),
    ...codexSimulatorOptions(sim.url),
  });
  const spawnedAt = performance.now();
  const child = spawn(launch.command, launch.args, {
    env: { PATH: process.env.PATH!, ...launch.env },
    stdio: ["pipe", "pipe", "ignore"],
  });
  const waiting = new Map<number, (v: any) => void>();
  const notes: Array<(m: any) => void> = [];
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const m = JSON.parse(line);
    if (m.id !== undefined && !m.method) waiting.get(m.id)?.(m.result);
    else notes.forEach((n) => n(m));
  });
  let id = 0;
  const call = (method: string, params: unknown) =>
    new Promise<any>((res) => {
      waiting.set(++id, res);
      child.stdin!.write(`${JSON.stringify({ id, method, params })}\n`);
    });
  const completed = () => new Promise<void>((res) => notes.push((m) => m.method === "turn/completed" && res()));
  // The same session the Codex adapter opens, built by its own mapper: the experimental API, a workspace-write thread
  // with the plan tool, and every turn naming its cwd, approval policy and collaboration mode. Codex's own work
  // differs with these (an untrusted-approval, sandboxed turn took 70-90 ms against 55-60 ms plain, here), so the
  // bare side does them too: the ratio is what Tiller adds, not what those settings cost.
  const workspace = join(root, "workspace");
  await mkdir(workspace);
  const tuning = { model: codexSimulatorOptions(sim.url).model.name, effort: null };
  const settings = { cwd: workspace, approvalPolicy: "untrusted", ...collaborationMode("default", tuning) };
  await call("initialize", {
    clientInfo: { name: "bare", title: null, version: "0" },
    capabilities: { experimentalApi: true },
  });
  child.stdin!.write(`${JSON.stringify({ method: "initialized" })}\n`);
  const readyAt = performance.now();
  const { thread } = await call("thread/start", threadOpening(workspace, "workspace-write"));
  const turn = async (text: string) => {
    const done = completed();
    await call("turn/start", { threadId: thread.id, input: turnInput(text), ...settings });
    await done;
  };
  return {
    sim,
    spawnedAt,
    readyAt,
    turn,
    async interrupt() {
      sim.push({ hang: true, text: "long" });
      notes.length = 0;
      const streaming = new Promise<void>((res) => notes.push((m) => m.method === "item/agentMessage/delta" && res()));
      const ended = completed();
      const started = await call("turn/start", { threadId: thread.id, input: turnInput("long"), ...settings });
      await streaming;
      const t = performance.now();
      await call("turn/interrupt", { threadId: thread.id, turnId: started.turn.id });
      await ended;
      return performance.now() - t;
    },
    async close() {
      // Its exit is left out of the next measurement.
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGKILL");
        await exited;
      }
      await sim.close();
      await rm(root, { recursive: true, force: true });
    },
  };
}

/** `codex app-server` on the bare protocol: `start` from its spawn to the first turn's completion. */
export async function codexBare(): Promise<Timings> {
  const bare = await openBareCodex();
  try {
    bare.sim.push({ text: "warm" }, ...Array.from({ length: TEXT_TURNS }, () => ({ text: "hi" })));
    await bare.turn("warm up");
    const start = performance.now() - bare.spawnedAt; // spawn -> first turn completed, as for Tiller
    const firstTurnOnReadyHost = performance.now() - bare.readyAt; // as for Tiller with a prewarmed host
    const texts = await timeTextTurns(() => bare.turn("say hi"));
    const interrupt = await bare.interrupt();
    return { start, text: median(texts), texts, interrupt, firstTurnOnReadyHost };
  } finally {
    await bare.close();
  }
}

/**
 * Warm text turns bare and through Tiller (prewarmed), both sessions open at once and their turns taken in turn
 * (bare, Tiller; then Tiller, bare; ...): each pair sees the machine as it is at that moment. A shared 2-core machine
 * drifts by a good part of a Codex turn from one minute to the next (50-70 ms), far more than what Tiller adds.
 */
export async function codexTurnPairs(pairs: number): Promise<{ bare: number[]; tiller: number[] }> {
  const bare = await openBareCodex();
  const world = await codexWorld({ simulator: startSimulatorInWorker, runtime: { prewarm: ["codex"] } });
  try {
    const { rt } = world;
    await world.adapter.prewarm!();
    const { threadId } = await rt.createThread({ providerTarget: "codex", cwd: world.workspace });
    const replies = Array.from({ length: pairs + 1 }, () => ({ text: "hi" }));
    bare.sim.push(...replies);
    world.sim.push(...replies);
    const tillerTurn = async () =>
      void (await rt.waitForRun((await rt.sendMessage({ threadId, text: "say hi" })).runId));
    const bareTurn = () => bare.turn("say hi");
    await bareTurn(); // warm-up, each way
    await tillerTurn();
    const timed = async (turn: () => Promise<void>) => {
      const t = performance.now();
      await turn();
      return performance.now() - t;
    };
    const times = { bare: [] as number[], tiller: [] as number[] };
    for (let i = 0; i < pairs; i++) {
      if (i % 2 === 0) {
        times.bare.push(await timed(bareTurn));
        times.tiller.push(await timed(tillerTurn));
      } else {
        times.tiller.push(await timed(tillerTurn));
        times.bare.push(await timed(bareTurn));
      }
    }
    return times;
  } finally {
    await world.cleanup();
    await bare.close();
  }
}

/** The same through Tiller; `prewarm`: the runtime opened with `prewarm: ["codex"]`, its app-server ready first. */
export const codexThroughTiller = async ({ prewarm = false }: { prewarm?: boolean } = {}): Promise<Timings> =>
  throughTiller(
    await codexWorld({ simulator: startSimulatorInWorker, ...(prewarm ? { runtime: { prewarm: ["codex"] } } : {}) }),
    "codex",
    { prewarmed: prewarm },
  );

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href)
  await compare([
    ["bare protocol", codexBare],
    ["through Tiller", () => codexThroughTiller()],
    ["Tiller, prewarm", () => codexThroughTiller({ prewarm: true })],
  ]);
