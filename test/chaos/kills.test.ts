import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { TillerError, type RequestResponse } from "../../src/index.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import {
  killAdapter,
  KILL_TARGET,
  seededRandom,
  type ChildLine,
  type KillSteering,
  type KillTransport,
} from "./killWorkload.js";
import {
  freezeAndKill,
  killGroup,
  readLog,
  stateAtKill,
  stillRunning,
  type HostProcess,
  type LogLine,
} from "./killProcesses.js";
import { tallyChaos } from "./tally.js";
import { openRuntime } from "../support/internals.js";

/**
 * Issue 12's standing SIGKILL loop. A real runtime in a child process (killChild.ts) drives a
 * mixed workload through a scripted provider in a host process (stdio, WebSocket and unix socket, in turn):
 * streamed text, commands and file changes waiting for approval, questions, queued follow-ups,
 * steers (native, and by interrupt-restart), restarts and interrupts. It reports on stdout what
 * it was acknowledged. The parent SIGKILLs it after K acknowledged events (K drawn from a
 * seeded generator; the parent waits on the child's output, never on time), or, twice, the
 * moment the child forked its first host (before the runtime could record that host). Then
 * it reopens the data directory in this process and checks, from the README's promises
 * ("Durability", "What the runtime does for you") and the domain model's "Startup recovery":
 *   1. no run left running: a run that was not queued is settled (cancelled); queued runs resume and end;
 *   2. no acknowledged event lost: every record the child received is in the log, same seq, same
 *      record; every receipt it got is there and a repeated command id returns it;
 *   3. no dead request answerable: every request pending at the kill is expired in affordances
 *      and `respond` refuses it with not_resumable; unless its run was taken up again (a socket
 *      host, whose record says pending requests survive a restart, outlived the child): then it is
 *      answerable, and the answer lets its run end;
 *   4. no orphaned host survives: every host process of the dead child (reported by it, or found
 *      among its children at the kill) is gone (by pid and kernel start time) once the reopen
 *      returns (the reopen reaps them), or is one the reopened runtime took up;
 *   5. the log is whole: every line parses as a domain event, seq gap-free from 1 (at most a torn
 *      last line after a kill), and a reopen only appends.
 * Replay a failure with TILLER_KILL_SEED=<seed>; TILLER_KILL_REPORT=1 prints what each kill hit.
 */

const SEED = Number(process.env.TILLER_KILL_SEED ?? 20_261_201);
/** Kills at random points (after K acknowledged records), and kills at the fork of a host. */
const RANDOM_KILLS = 20;
const AT_HOST_SPAWN = [2, 3, 4];
const ROUNDS = RANDOM_KILLS + AT_HOST_SPAWN.length;
const CHILD = join(import.meta.dirname, "killChild.ts");
/** Generous: a run that does not end within this is stuck (a failure, never a hang). */
const RUN_END_MS = 60_000;
const verbose = process.env.TILLER_KILL_REPORT === "1";
const TRANSPORTS: readonly KillTransport[] = ["stdio", "websocket", "socket"];

interface Round {
  round: number;
  transport: KillTransport;
  steering: KillSteering;
  /** Kill after this many acknowledged records, or (null) the moment the child forked its first host. */
  killAfter: number | null;
  childSeed: number;
}

function plan(seed: number): Round[] {
  const random = seededRandom(seed);
  return Array.from({ length: ROUNDS }, (_, round) => ({
    round,
    transport: TRANSPORTS[round % TRANSPORTS.length]!,
    // Each steering mode has its own data directory, reopened by both transports in turn.
    steering: Math.floor(round / 2) % 2 === 0 ? "native" : "restart",
    // A quarter of the random kills land early (the child's start, its first host, the parked
    // approval), the rest mid-workload.
    killAfter: AT_HOST_SPAWN.includes(round) ? null : random.next() < 0.25 ? random.int(1, 30) : random.int(31, 500),
    childSeed: random.int(1, 2 ** 31 - 1),
  }));
}

interface Killed {
  lines: ChildLine[];
  /** Host processes that were children of the child when it was frozen for the kill. */
  frozenHosts: HostProcess[];
}

/** Every host process a dead child left: killed at the end if the runtime did not reap it (a failed check). */
const leftovers: HostProcess[] = [];

/** Runs the child until its kill point, then freezes it, notes its hosts and SIGKILLs it. */
async function runAndKill(r: Round, dataDir: string, workDir: string): Promise<Killed> {
  const args = [
    CHILD,
    dataDir,
    workDir,
    r.transport,
    r.steering,
    String(r.childSeed),
    ...(r.killAfter === null ? ["at-host-spawn"] : []),
  ];
  const proc = spawn(process.execPath, ["--import", "tsx", ...args], { stdio: ["ignore", "pipe", "inherit"] });
  let ended = false;
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    proc.once("exit", (_code, signal) => resolve(((ended = true), signal))),
  );
  const lines: ChildLine[] = [];
  let acks = 0;
  let torn: string | null = null;
  let frozenHosts: HostProcess[] | null = null;
  const kill = async () => {
    frozenHosts = await freezeAndKill(proc.pid!);
    leftovers.push(...frozenHosts);
  };
  try {
    // Everything the child wrote before it died counts, also what it wrote after its kill point.
    for await (const text of createInterface({ input: proc.stdout! })) {
      expect(torn, `round ${r.round}: only the last line the child wrote may be torn`).toBeNull();
      let line: ChildLine;
      try {
        line = JSON.parse(text) as ChildLine;
      } catch {
        torn = text;
        continue;
      }
      lines.push(line);
      if (line.t === "host" && line.startTime !== null) leftovers.push({ pid: line.pid, startTime: line.startTime });
      const due = line.t === "ack" ? ++acks === r.killAfter : line.t === "spawned" && r.killAfter === null;
      if (due && frozenHosts === null) await kill();
    }
  } finally {
    if (!ended && frozenHosts === null) await kill(); // a check failed before the kill point
  }
  const signal = await exited;
  expect(
    frozenHosts,
    `round ${r.round}: the child ended by itself (${signal}) after ${acks} records, ` +
      `before its kill point (${r.killAfter ?? "at host spawn"})`,
  ).not.toBeNull();
  expect(signal).toBe("SIGKILL");
  return { lines, frozenHosts: frozenHosts! };
}

const answerFor = (kind: string): RequestResponse =>
  kind === "user_input" ? { kind: "answers", answers: { q1: "red" } } : { kind: "decision", decision: "accept" };

async function expectRefused(promise: Promise<unknown>, code: string, what: string): Promise<void> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error, `${what}: expected ${code}`).toBeInstanceOf(TillerError);
  expect((error as TillerError).code, what).toBe(code);
}

interface Figures {
  acked: number;
  receipts: number;
  pendingRequests: number;
  settledRuns: number;
  resumedRuns: number;
  /** Runs taken up again in a host that outlived the child. */
  reattachedRuns: number;
  hosts: number;
}

/** Reopens the data directory after a kill and checks every promise; returns what the kill hit. */
async function checkRecovery(r: Round, dataDir: string, killed: Killed): Promise<Figures> {
  const killedAt = r.killAfter === null ? "at its host's fork" : `after ${r.killAfter}`;
  const where =
    `round ${r.round} (${r.transport}, ${r.steering} steering, ` + `killed ${killedAt}, child seed ${r.childSeed})`;
  const faults = killed.lines.filter((l): l is Extract<ChildLine, { t: "fault" }> => l.t === "fault");
  expect(
    faults.map((f) => f.message),
    `${where}: the child saw untyped errors or runtime failures`,
  ).toEqual([]);
  const acked = killed.lines.filter((l): l is Extract<ChildLine, { t: "ack" }> => l.t === "ack").map((l) => l.record);
  const receipts = killed.lines.filter((l): l is Extract<ChildLine, { t: "receipt" }> => l.t === "receipt");

  // The log as the dead child left it: every complete line a domain event, seq gap-free.
  const before = await readLog(dataDir, { tornTailAllowed: true });
  expect(before.problems, `${where}: log left by the kill`).toEqual([]);
  const bySeq = new Map(before.records.map((rec) => [rec.seq, rec]));
  for (const record of acked)
    expect(bySeq.get(record.seq), `${where}: acknowledged record ${record.seq} (${record.event.type})`).toEqual(record);
  const atKill = stateAtKill(before.records);

  const failures: string[] = [];
  const adapter = killAdapter(r.transport, r.steering);
  const rt: Runtime = await openRuntime({
    dataDir,
    providers: { [KILL_TARGET]: adapter },
    onFailure: (f) => void failures.push(JSON.stringify(f)),
  });
  const answering: Array<Promise<unknown>> = [];
  let figures: Figures;
  try {
    // Requests opened by runs that resume now are answered, so those runs can end.
    rt.subscribe({ afterSeq: before.head }, ({ event }) => {
      if (event.type !== "request.opened") return;
      const answered = rt.respond({ requestId: event.requestId, response: answerFor(event.payload.kind) });
      answering.push(
        answered.catch((e: unknown) => void (e instanceof TillerError || failures.push(`respond threw ${String(e)}`))),
      );
    });

    // 4. No host of the dead child survives the reopen: it reaps them before it returns (a host
    // that would end by itself later, as a stdio host at its stdin's end, does not count).
    const hosts = new Map<number, HostProcess>();
    for (const h of killed.frozenHosts) hosts.set(h.pid, h);
    for (const l of killed.lines)
      if (l.t === "host" && l.startTime !== null) hosts.set(l.pid, { pid: l.pid, startTime: l.startTime });
    // Unless the reopen took it up (a socket host whose record says its requests survive a restart).
    const adopted = new Set([...rt.hosts.supervisors.keys()].flatMap((key) => rt.hosts.pids(key)));
    for (const host of hosts.values())
      expect(
        stillRunning(host) && !adopted.has(host.pid),
        `${where}: host pid ${host.pid} of the dead child still runs after the reopen, not taken up`,
      ).toBe(false);
    // Runs taken up again in such a host: waiting on requests still answerable (answered below).
    const reattached = new Set(
      (await readLog(dataDir, { tornTailAllowed: false })).records
        .slice(before.records.length)
        .flatMap((rec) =>
          rec.event.type === "runtime.recovered" ? ((rec.event.reattachedRuns as string[]) ?? []) : [],
        ),
    );
    if (r.transport !== "socket") expect(reattached, `${where}: runs taken up again`).toEqual(new Set());

    // 5 and 2. Reopening only appended; every acknowledged record and receipt is still there.
    const reopened = await readLog(dataDir, { tornTailAllowed: false });
    expect(reopened.problems, `${where}: log after the reopen`).toEqual([]);
    expect(reopened.records.slice(0, before.records.length), `${where}: the reopen rewrote the log`).toEqual(
      before.records,
    );
    const loggedReceipts = new Map<string, LogLine["event"]>();
    for (const rec of reopened.records)
      if (rec.event.type === "command.receipt") loggedReceipts.set(String(rec.event.commandId), rec.event);
    for (const { command, input, receipt } of receipts) {
      const commandId = String(input.commandId);
      expect(loggedReceipts.get(commandId), `${where}: receipt of ${command} ${commandId}`).toMatchObject({
        command,
        receipt,
      });
      const again = await (rt[command] as (i: unknown) => Promise<unknown>).call(rt, input);
      expect(again, `${where}: ${command} repeated with ${commandId}`).toEqual(receipt);
    }

    // 1. Every run the child left: terminal ones as they were, queued ones still queued (or
    // already resumed), every other one settled as cancelled.
    const resumed: string[] = [];
    let settled = 0;
    for (const [runId, run] of atKill.runs) {
      const now = (await rt.readThread(run.threadId)).runs.find((v) => v.runId === runId);
      expect(now, `${where}: run ${runId}`).toBeDefined();
      if (run.terminal) expect(now!.status, `${where}: run ${runId} was ${run.status} at the kill`).toBe(run.status);
      else if (run.status === "queued" || reattached.has(runId)) resumed.push(runId);
      else {
        expect([now!.status, now!.reason], `${where}: run ${runId} was ${run.status} at the kill`).toEqual([
          "cancelled",
          "runtime_restarted",
        ]);
        settled++;
      }
    }

    // 3. Every request pending at the kill is dead: expired, and an answer is refused.
    for (const [requestId, request] of atKill.pendingRequests) {
      const offered = rt.affordances(request.threadId).requests.find((q) => q.requestId === requestId);
      if (reattached.has(request.runId)) {
        // Taken up again: still answerable, and answered (its run then ends, checked with the resumed ones).
        expect(offered?.state, `${where}: request ${requestId} of a run taken up again`).toBe("respondable");
        const answered = await rt.respond({ requestId, response: answerFor(request.kind) });
        expect(answered.status, `${where}: answering request ${requestId} of a run taken up again`).toBe("accepted");
        continue;
      }
      expect(offered?.state, `${where}: request ${requestId} (${request.kind}) pending at the kill`).toBe("expired");
      expect(
        (await rt.readThread(request.threadId)).pendingRequests.map((q) => q.requestId),
        `${where}: pending requests`,
      ).not.toContain(requestId);
      await expectRefused(
        rt.respond({ requestId, response: answerFor(request.kind) }),
        "not_resumable",
        `${where}: answering request ${requestId}`,
      );
    }

    // 1. Queued runs resume and end (a stuck one fails here, with its id).
    for (const runId of resumed) {
      const run = await rt.waitForRun(runId, { timeoutMs: RUN_END_MS }).catch((e: unknown) => {
        throw new Error(`${where}: queued run ${runId} did not end after the reopen: ${String(e)}`);
      });
      expect(["completed", "interrupted", "failed", "cancelled"], `${where}: resumed run ${runId}`).toContain(
        run.status,
      );
    }
    await Promise.all(answering);
    // Nothing anywhere is left open: every thread idle, every run, attempt and item settled.
    for (const { threadId } of rt.listThreads()) {
      const snapshot = await rt.readThread(threadId);
      expect(snapshot.thread.status, `${where}: thread ${threadId}`).toBe("idle");
      expect(snapshot.pendingRequests, `${where}: thread ${threadId}`).toEqual([]);
      for (const run of snapshot.runs) {
        const open = [
          ...run.attempts
            .filter((a) => a.status === "running" || a.status === "pending")
            .map((a) => `attempt ${a.attemptId} ${a.status}`),
          ...run.items.filter((i) => i.status === "streaming").map((i) => `item ${i.id} streaming`),
        ];
        expect(open, `${where}: run ${run.runId} is ${run.status}`).toEqual([]);
      }
    }
    expect(failures, `${where}: the reopened runtime reported failures`).toEqual([]);
    figures = {
      acked: acked.length,
      receipts: receipts.length,
      pendingRequests: atKill.pendingRequests.size,
      settledRuns: settled,
      resumedRuns: resumed.length,
      reattachedRuns: reattached.size,
      hosts: hosts.size,
    };
  } finally {
    await rt.close();
  }
  const closed = await readLog(dataDir, { tornTailAllowed: false });
  expect(closed.problems, `${where}: log after the close`).toEqual([]);
  return figures;
}

describe("chaos: SIGKILL loop", () => {
  it(
    `${ROUNDS} kills of a runtime, at random points and at a host's fork (stdio, WebSocket and socket hosts, ` +
      `approvals pending): nothing running, nothing acknowledged lost, nothing dead answerable, no orphan`,
    async () => {
      const rounds = plan(SEED);
      console.info(
        `chaos kills: seed ${SEED} (replay with TILLER_KILL_SEED=${SEED}); kill points: ` +
          `${rounds.map((r) => `${r.transport.slice(0, 2)}/${r.steering[0]}@${r.killAfter ?? "spawn"}`).join(" ")}`,
      );
      const root = await mkdtemp(join(tmpdir(), "tiller-chaos-kills-"));
      const dirs = { native: join(root, "native"), restart: join(root, "restart") };
      const workDir = join(root, "work");
      await mkdir(workDir);
      let kills = 0;
      let withPending = 0;
      let reattachedRounds = 0;
      // The two data directories' sequences run side by side (each one's rounds in order): a
      // child boots in one while the other is being checked.
      const sequence = async (steering: KillSteering) => {
        for (const r of rounds.filter((round) => round.steering === steering)) {
          const dataDir = dirs[r.steering];
          const killed = await runAndKill(r, dataDir, workDir);
          kills++;
          const figures = await checkRecovery(r, dataDir, killed);
          if (figures.pendingRequests > 0) withPending++;
          if (figures.reattachedRuns > 0) reattachedRounds++;
          if (verbose)
            console.info(
              `chaos kills: round ${r.round} ${r.transport}/${r.steering} ` +
                `at ${r.killAfter ?? "spawn"}: ${JSON.stringify(figures)}`,
            );
        }
      };
      try {
        const outcomes = await Promise.allSettled([sequence("native"), sequence("restart")]);
        for (const outcome of outcomes) if (outcome.status === "rejected") throw outcome.reason;
      } finally {
        for (const host of leftovers) if (stillRunning(host)) killGroup(host.pid);
        await rm(root, { recursive: true, force: true });
      }
      // The parked approval opens within the child's first records, so the mid-workload kills all have one pending.
      expect(withPending).toBeGreaterThanOrEqual(rounds.filter((r) => r.killAfter !== null && r.killAfter > 30).length);
      expect(kills).toBe(ROUNDS);
      // The parked approval survives every socket round killed after it opened: its run is taken up again.
      expect(reattachedRounds).toBeGreaterThanOrEqual(
        rounds.filter((r) => r.transport === "socket" && r.killAfter !== null && r.killAfter > 30).length,
      );
      for (const transport of TRANSPORTS)
        expect(rounds.filter((r) => r.transport === transport).length).toBeGreaterThanOrEqual(7);
      expect(rounds.filter((r) => r.killAfter === null).map((r) => r.transport)).toEqual([
        "socket",
        "stdio",
        "websocket",
      ]);
      tallyChaos("kills", { properties: 5, runs: ROUNDS, kills, violations: 0 });
    },
    180_000,
  );
});
