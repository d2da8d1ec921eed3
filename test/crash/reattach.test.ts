import { execFile, spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { DomainEvent } from "../../src/index.js";
import { isSameProcess, processGone } from "../../src/runtime/hosts/process.js";
import type { HostRecord } from "../../src/runtime/hosts/records.js";
import { crashWithApprovalPending } from "../model/models/threadPolicies.js";
import { World, type Flags } from "../model/world.js";
import { tempDir } from "../support/files.js";

/**
 * A runtime SIGKILLed while its provider runs in a host process on a unix socket, which outlives it: what the next
 * runtime on the same data directory makes of the turns that host still runs. The capability record decides
 * (`sessions.pendingRequestsSurviveRestart`, `approvals.approvalCallbacksAreLiveOnly`); whatever it says, nothing is
 * lost, nothing is stuck, and nothing the runtime no longer owns keeps running on its threads.
 */

const SURVIVE: Flags = {
  "main.sessions.pendingRequestsSurviveRestart": true,
  "main.approvals.approvalCallbacksAreLiveOnly": false,
};

const reopenChild = join(import.meta.dirname, "reopenChild.ts");
const opened: World[] = [];
afterEach(async () => {
  for (const world of opened.splice(0)) await world.close();
});

async function crashAndReopen(flags: Flags, kind: "approval" | "plain" | "both" | "interrupted" = "approval") {
  const { dir } = await tempDir("tiller-reattach-");
  const threadId = await crashWithApprovalPending(dir, flags, true, kind);
  const hosts = await hostRecords(join(dir, "data"));
  return { world: await reopen(dir, threadId, flags), hosts };
}

/** The next runtime on the crashed one's data directory (its provider in a socket host), once at rest. */
async function reopen(dir: string, threadId: string, flags: Flags): Promise<World> {
  const world = await World.open(flags, ["main"], {}, dir, { hosted: true });
  opened.push(world);
  world.threadId = threadId;
  world.adoptRun(world.rt.views.threads.get(threadId)!.runs[0]!.runId, 1);
  world.n = 1;
  await world.settle();
  return world;
}

async function hostRecords(dataDir: string): Promise<HostRecord[]> {
  return (JSON.parse(await readFile(join(dataDir, "runtimes", "hosts.json"), "utf8")) as { hosts: HostRecord[] }).hosts;
}

const eventsOf = (world: World) => world.records.map((r) => r.event);
const ofType = <T extends DomainEvent["type"]>(events: DomainEvent[], type: T) =>
  events.filter((e): e is Extract<DomainEvent, { type: T }> => e.type === type);

/** Sends the next prompt, lets it finish, and says how it ended and what it said. */
async function nextTurn(world: World): Promise<{ status: string; text: string }> {
  await world.send("plain");
  await world.until("the turn to run", () => world.run().status === "running");
  world.finish();
  await world.until("the turn to end", () => !["queued", "starting", "running"].includes(world.run().status));
  const text = world
    .run()
    .items.filter((i) => i.kind === "assistant_message")
    .map((i) => i.text ?? "");
  return { status: world.run().status, text: text.join("") };
}

describe("a provider host that outlives the runtime", () => {
  it("takes a request pending at the crash up again where the record says it survives; the turn finishes", async () => {
    const { world, hosts } = await crashAndReopen(SURVIVE);
    const [run] = world.rt.views.threads.get(world.threadId)!.runs;
    const [request] = world.rt.views.pendingRequests(world.threadId);
    expect(run!.status).toBe("waiting");
    expect(world.rt.affordances(world.threadId).requests).toEqual([
      expect.objectContaining({ requestId: request!.requestId, state: "respondable" }),
    ]);
    const recovered = ofType(eventsOf(world), "runtime.recovered");
    expect(recovered).toEqual([
      {
        type: "runtime.recovered",
        cancelledRuns: [],
        expiredRequests: [],
        requeuedRuns: [],
        reattachedRuns: [run!.runId],
      },
    ]);
    // Its session taken up, never started again: ready once more in the host generation that asked.
    const session = request!.responseCapability.kind === "live" ? request!.responseCapability.sessionId : "";
    const mine = eventsOf(world).filter((e) => "sessionId" in e && e.sessionId === session);
    expect(ofType(mine, "session.started")).toHaveLength(1);
    expect(ofType(mine, "session.state").slice(-2)).toEqual([
      expect.objectContaining({ status: "ready", message: "re-attached after a runtime restart (host generation 1)" }),
      expect.objectContaining({ status: "running" }),
    ]);
    // The very host the crashed runtime started, still running.
    expect(hosts).toHaveLength(1);
    expect(await isSameProcess(hosts[0]!.pid, hosts[0]!.startTime)).toBe(true);

    const before = world.head;
    await world.rt.respond({ requestId: request!.requestId, response: { kind: "decision", decision: "accept" } });
    world.finish();
    await world.rt.waitForRun(run!.runId);
    const view = world.rt.views.runs.get(run!.runId)!;
    expect(view.status).toBe("completed");
    expect(view.items.filter((i) => i.kind === "assistant_message").map((i) => i.text)).toEqual([
      "asking 1",
      " done 1",
    ]);
    // One command item, the one that asked, completed by the provider with its output; nothing left open.
    const commands = view.items.filter((i) => i.kind === "command");
    expect(commands).toEqual([expect.objectContaining({ status: "complete", output: "1\n" })]);
    expect(view.items.filter((i) => i.status === "streaming")).toEqual([]);
    const after = world.records.filter((r) => r.seq > before).map((r) => r.event);
    expect(ofType(after, "warning")).toEqual([]);
    expect(ofType(after, "event.fenced")).toEqual([]);
    // The re-attached session goes on serving the thread.
    expect(await nextTurn(world)).toEqual({ status: "completed", text: "working 2 done 2" });
  });

  it("expires it where callbacks live only on the asking connection (requests_expire_with_connection)", async () => {
    const { world } = await crashAndReopen({ ...SURVIVE, "main.approvals.approvalCallbacksAreLiveOnly": true });
    const events = eventsOf(world);
    expect(ofType(events, "policy.applied").map((p) => p.policy)).toContain("requests_expire_with_connection");
    expect(world.run().status).toBe("cancelled");
    expect(world.rt.affordances(world.threadId).requests[0]?.state).toBe("expired");
    // The turn the host still ran for it was stopped with its session: the thread's next turn runs.
    expect(await nextTurn(world)).toEqual({ status: "completed", text: "working 2 done 2" });
  });

  it("expires it where the record says requests do not survive, and the thread's next turn runs", async () => {
    const { world } = await crashAndReopen({ ...SURVIVE, "main.sessions.pendingRequestsSurviveRestart": false });
    expect(ofType(eventsOf(world), "policy.applied").map((p) => p.policy)).toContain("requests_expire_on_restart");
    expect(world.run().status).toBe("cancelled");
    expect(await nextTurn(world)).toEqual({ status: "completed", text: "working 2 done 2" });
  });

  it("cancels a run that was streaming (no request to take up), stops its turn there: the next turn runs", async () => {
    const { world } = await crashAndReopen(SURVIVE, "plain");
    expect(world.run().status).toBe("cancelled");
    expect(world.run().items.filter((i) => i.status === "streaming")).toEqual([]);
    expect(await nextTurn(world)).toEqual({ status: "completed", text: "working 2 done 2" });
  });

  for (const [shared, sessions] of [
    [true, "one session"],
    [false, "a session per thread"],
  ] as const)
    it(`beside a re-attached run, stops the turn of another thread's cancelled run (${sessions})`, async () => {
      const flags = { ...SURVIVE, "main.sessions.supportsMultipleProviderThreadsPerSession": shared };
      const { world } = await crashAndReopen(flags, "both");
      const first = world.threadId;
      const [second] = [...world.rt.views.threads.keys()].filter((t) => t !== first);
      expect(world.rt.views.threads.get(first)!.runs.map((r) => r.status)).toEqual(["waiting"]);
      expect(world.rt.views.threads.get(second!)!.runs.map((r) => r.status)).toEqual(["cancelled"]);
      // The second thread's provider thread is free again: its next turn runs there.
      world.threadId = second!;
      world.n = 2;
      expect(await nextTurn(world)).toEqual({ status: "completed", text: "working 3 done 3" });
      // And the first thread's request is still answerable.
      world.threadId = first;
      const [request] = world.rt.views.pendingRequests(first);
      await world.rt.respond({ requestId: request!.requestId, response: { kind: "decision", decision: "accept" } });
      world.openGate(1);
      await world.rt.waitForRun(world.rt.views.threads.get(first)!.runs[0]!.runId);
      expect(world.rt.views.threads.get(first)!.runs[0]!.status).toBe("completed");
    });

  it("lets the process that took the host up exit once the runtime closed (nothing else alive)", async () => {
    const { dir } = await tempDir("tiller-reattach-");
    await crashWithApprovalPending(dir, SURVIVE, true);
    const run = promisify(execFile)(process.execPath, ["--import", "tsx", reopenChild, dir, JSON.stringify(SURVIVE)]);
    await expect(run).resolves.toEqual(expect.objectContaining({ stdout: "closed\n" }));
  });

  it("takes the run up again after a second crash, of the runtime that had taken it up", async () => {
    const { dir } = await tempDir("tiller-reattach-");
    const threadId = await crashWithApprovalPending(dir, SURVIVE, true);
    const child = spawn(process.execPath, ["--import", "tsx", reopenChild, dir, JSON.stringify(SURVIVE), "hold"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const exited = new Promise((done) => child.on("exit", done));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (chunk: Buffer) => chunk.toString().includes("ready") && resolve());
      child.on("exit", (code) => reject(new Error(`reopen child exited early (${code})`)));
    });
    child.kill("SIGKILL");
    await exited;
    const world = await reopen(dir, threadId, SURVIVE);
    const recovered = ofType(eventsOf(world), "runtime.recovered");
    expect(recovered.map((r) => r.reattachedRuns)).toEqual([[world.runId], [world.runId]]);
    const [request] = world.rt.views.pendingRequests(threadId);
    await world.rt.respond({ requestId: request!.requestId, response: { kind: "decision", decision: "accept" } });
    world.finish();
    await world.rt.waitForRun(world.runId);
    expect(world.run().status).toBe("completed");
    expect(world.run().items.filter((i) => i.kind === "command")).toHaveLength(1);
  });

  it("settles as before a run whose interrupt was asked for (it may not have reached the provider)", async () => {
    const { world } = await crashAndReopen(SURVIVE, "interrupted");
    expect(world.run().status).toBe("cancelled");
    expect(ofType(eventsOf(world), "runtime.recovered").map((r) => r.reattachedRuns ?? [])).toEqual([[]]);
    expect(await nextTurn(world)).toEqual({ status: "completed", text: "working 2 done 2" });
  });

  it("expires the request of a host that died with the runtime, and the thread's next turn runs", async () => {
    const { dir } = await tempDir("tiller-reattach-");
    const threadId = await crashWithApprovalPending(dir, SURVIVE, true);
    const [host] = await hostRecords(join(dir, "data"));
    process.kill(host!.pid, "SIGKILL");
    await processGone(host!.pid, host!.startTime);
    const world = await reopen(dir, threadId, SURVIVE);
    expect(world.run().status).toBe("cancelled");
    expect(world.rt.views.requests.get([...world.rt.views.requests.keys()][0]!)).toEqual(
      expect.objectContaining({
        status: "expired",
        closedReason: "not_resumable: the run that asked was cancelled by recovery",
      }),
    );
    expect(await nextTurn(world)).toEqual({ status: "completed", text: "working 2 done 2" });
  });
});
