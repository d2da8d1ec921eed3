/**
 * A runtime in its own process, driven by a seeded random workload until its parent SIGKILLs
 * it (kills.test.ts). Its provider is the scripted provider in a host process (stdio or
 * WebSocket). On stdout, one JSON line per thing it was acknowledged (killWorkload.ts,
 * ChildLine): every durable record its subscriber received, every command receipt, every
 * host pid its sessions run in.
 *
 * node --import tsx test/chaos/killChild.ts <dataDir> <workDir> <stdio|websocket> <native|restart> <seed>
 * [at-host-spawn]
 *
 * With `at-host-spawn`, the child stops dead the moment its first host process is forked (it
 * says `spawned` and blocks, as if the kill came at that instant): the runtime has not yet
 * written that host's record.
 *
 * First an approval that is never answered (so one is pending at almost every kill) with a
 * follow-up queued behind it (so a queued run must resume after almost every kill); then,
 * without end, on three threads: streamed text, commands and file changes waiting for
 * approval, questions, queued follow-ups, steers, restarts, interrupts and answers.
 */
import { ChildProcess } from "node:child_process";
import {
  TillerError,
  type DispatchMode,
  type LogRecord,
  type DomainEvent,
  type RequestResponse,
} from "../../src/index.js";
import { processStartTime } from "../../src/runtime/hosts/process.js";
import {
  KILL_MARKERS,
  KILL_TARGET,
  PARKED_TEXT,
  killAdapter,
  seededRandom,
  type ChildLine,
  type KillSteering,
  type KillTransport,
} from "./killWorkload.js";
import { openRuntime } from "../support/internals.js";

const [dataDir, workDir, transport, steering, seedText, point] = process.argv.slice(2);
if (!dataDir || !workDir || !transport || !steering || !seedText)
  throw new Error("usage: killChild.ts <dataDir> <workDir> <transport> <steering> <seed> [at-host-spawn]");
const rng = seededRandom(Number(seedText));
const say = (line: ChildLine) => void process.stdout.write(JSON.stringify(line) + "\n");

if (point === "at-host-spawn") {
  // At the process boundary: right after the fork of a scripted host, before the runtime's
  // next step, this process stops (synchronously, for good) until its parent kills it.
  // ChildProcess#spawn is what child_process.spawn calls once the process object exists (not in its typings).
  type Spawning = { pid?: number; spawn(options: { args?: string[] }): unknown };
  const prototype = ChildProcess.prototype as unknown as Spawning;
  const spawn = prototype.spawn;
  prototype.spawn = function (this: Spawning, options) {
    const result = spawn.call(this, options);
    if (options.args?.some((arg) => /adapters[\\/]scripted[\\/]host[\\/]main/.test(arg))) {
      say({ t: "spawned", pid: this.pid ?? 0 });
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
    }
    return result;
  };
}

const adapter = killAdapter(transport as KillTransport, steering as KillSteering);
const rt = await openRuntime({
  dataDir,
  providers: { [KILL_TARGET]: adapter },
  onFailure: (failure) => say({ t: "fault", message: `onFailure: ${JSON.stringify(failure)}` }),
});

/** Requests acknowledged as open, by id (what the workload may answer). */
const open = new Map<string, { threadId: string; kind: string }>();
let parkedRequest: string | null = null;
let parkedOpened: () => void = () => undefined;
const parked = new Promise<void>((resolve) => (parkedOpened = resolve));
let parkedThreadId: string | null = null;

rt.subscribe({ afterSeq: rt.views.head }, (record: LogRecord<DomainEvent>) => {
  say({ t: "ack", record: record as Extract<ChildLine, { t: "ack" }>["record"] });
  const event = record.event;
  if (event.type === "request.opened") {
    open.set(event.requestId, { threadId: event.threadId, kind: event.payload.kind });
    if (event.threadId === parkedThreadId && parkedRequest === null) {
      parkedRequest = event.requestId;
      parkedOpened();
    }
  }
  if (event.type === "run.terminal" && event.threadId === parkedThreadId && parkedRequest === null) {
    say({ t: "fault", message: `the parked run ended ${event.status} without asking for its approval` });
    parkedOpened();
  }
  if (event.type === "request.resolved" || event.type === "request.closed") open.delete(event.requestId);
  if (event.type === "session.started") {
    const pid = adapter.hostPid(event.sessionId);
    if (pid !== null) void processStartTime(pid).then((startTime) => say({ t: "host", pid, startTime }));
  }
});

let commands = 0;
const nextId = () => `kill-${seedText}-${++commands}`;

/** Runs a command and reports its receipt, or its typed refusal; anything untyped is a fault. */
async function command<I extends Record<string, unknown>, R>(
  name: Extract<ChildLine, { t: "receipt" }>["command"],
  input: I,
  call: (input: I) => Promise<R>,
): Promise<R | null> {
  try {
    const receipt = await call(input);
    say({ t: "receipt", command: name, input, receipt: receipt as Record<string, unknown> });
    return receipt;
  } catch (error) {
    if (error instanceof TillerError) say({ t: "refused", command: name, code: error.code });
    else say({ t: "fault", message: `${name} threw ${String(error)}` });
    return null;
  }
}

const createThread = (title: string) =>
  command("createThread", { providerTarget: KILL_TARGET, title, cwd: workDir, commandId: nextId() }, (i) =>
    rt.createThread(i),
  );
const send = (threadId: string, text: string, mode: DispatchMode) =>
  command("sendMessage", { threadId, text, mode, commandId: nextId() }, (i) => rt.sendMessage(i));

// The parked approval, and a follow-up queued behind it.
const parkedThread = await createThread("parked");
if (!parkedThread) throw new Error("could not create the parked thread");
parkedThreadId = parkedThread.threadId;
await send(parkedThread.threadId, PARKED_TEXT, "auto");
await parked;
await send(parkedThread.threadId, "[stream] behind the parked approval", "queue");

const workers: string[] = [];
for (const title of ["one", "two", "three"]) {
  const created = await createThread(title);
  if (created) workers.push(created.threadId);
}

const answer = (kind: string): RequestResponse =>
  kind === "user_input"
    ? { kind: "answers", answers: { q1: rng.pick(["red", "blue"]) } }
    : {
        kind: "decision",
        decision: rng.weighted([
          ["accept", 4],
          ["decline", 1],
          ["cancel", 1],
          ["accept_for_session", 1],
        ] as const),
      };

for (let n = 1; ; n++) {
  const threadId = rng.pick(workers);
  const snapshot = await rt.readThread(threadId);
  const queued = snapshot.runs.filter((r) => r.status === "queued").length;
  const active = snapshot.runs.find((r) => ["starting", "running", "waiting"].includes(r.status));
  const answerable = [...open].filter(([id, r]) => id !== parkedRequest && r.threadId === threadId);
  const action = rng.weighted([
    ["send", 6],
    ["interrupt", active ? 2 : 0],
    ["respond", answerable.length > 0 ? 4 : 0],
  ] as const);
  if (action === "interrupt") {
    await command("interrupt", { runId: active!.runId, commandId: nextId() }, (i) => rt.interrupt(i));
  } else if (action === "respond") {
    const [requestId, request] = rng.pick(answerable);
    await command("respond", { requestId, response: answer(request.kind), commandId: nextId() }, (i) => rt.respond(i));
  } else {
    // A message to a thread: what it asks for, and how it is dispatched. Once a follow-up
    // waits, only steers and restarts, so what recovery must resume stays small.
    const modes =
      queued === 0
        ? ([
            ["auto", 4],
            ["queue", 2],
            ["steer", 1],
            ["restart", 1],
          ] as const)
        : ([
            ["steer", 2],
            ["restart", 1],
          ] as const);
    const mode = rng.weighted<DispatchMode>(modes);
    await send(threadId, `${rng.pick(KILL_MARKERS)} message ${n}`.trim(), mode);
  }
  // One turn of the event loop per action, so a run of refusals cannot starve the runtime.
  await new Promise((resolve) => setImmediate(resolve));
}
