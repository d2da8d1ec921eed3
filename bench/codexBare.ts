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
import { startSimulatorInWorker } from "./simulatorWorker.js";
import { codexWorld } from "../test/codex/harness.js";
import { pathToFileURL } from "node:url";
import { compare, median, TEXT_TURNS, throughTiller, timeTextTurns, type Timings } from "./compare.js";

/** `codex app-server` on the bare protocol: `start` from its spawn to the first turn's completion. */
export async function codexBare(): Promise<Timings> {
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
  const t0 = performance.now();
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
  const ready = performance.now();
  const { thread } = await call("thread/start", threadOpening(workspace, "workspace-write"));
  const turn = async (text: string) => {
    const done = completed();
    await call("turn/start", { threadId: thread.id, input: turnInput(text), ...settings });
    await done;
  };
  sim.push({ text: "warm" }, ...Array.from({ length: TEXT_TURNS }, () => ({ text: "hi" })));
  await turn("warm up");
  const start = performance.now() - t0; // spawn -> first turn completed, as for Tiller
  const firstTurnOnReadyHost = performance.now() - ready; // as for Tiller with a prewarmed host
  const texts = await timeTextTurns(() => turn("say hi"));
  sim.push({ hang: true, text: "long" });
  notes.length = 0;
  const streaming = new Promise<void>((res) => notes.push((m) => m.method === "item/agentMessage/delta" && res()));
  const ended = completed();
  const started = await call("turn/start", {
    threadId: thread.id,
    input: turnInput("long"),
    ...settings,
  });
  await streaming;
  const t2 = performance.now();
  await call("turn/interrupt", { threadId: thread.id, turnId: started.turn.id });
  await ended;
  const interrupt = performance.now() - t2;
  // Its exit is left out of the next measurement.
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
  }
  await sim.close();
  await rm(root, { recursive: true, force: true });
  return { start, text: median(texts), texts, interrupt, firstTurnOnReadyHost };
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
