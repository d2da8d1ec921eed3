import { chmod, mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keyedScript, ScriptedBackend } from "../../src/index.js";
import type { CapabilityOverrides, ScriptStep, TillerRuntime } from "../../src/index.js";
import { nextEvent, ofType, openTestRuntime } from "../support/runtime.js";
import { gitIn as git, snapshotFiles, tempDir } from "../support/files.js";
import { policies, rejectsWith, row, scripted, streaming } from "../support/policies.js";
import { gitDouble } from "../checkpoints/gitDouble.js";
import { isolatedHome, useEnv, useHome } from "../checkpoints/isolated.js";

/**
 * Rollback against a real user git repository, with runtime-owned git checkpoints: files go
 * back to the end of run N, later runs become rolled_back, and the user's own git state
 * (HEAD, branch, index, stash) and ignored content are never touched.
 */

// The checkpoint store reads the user's git config (core.excludesFile): a temporary HOME, never this machine's.
let home: Awaited<ReturnType<typeof isolatedHome>>;
let restoreHome: () => void;
beforeAll(async () => {
  home = await isolatedHome();
  restoreHome = useHome(home.env);
});
afterAll(async () => {
  restoreHome();
  await home.cleanup();
});

async function put(dir: string, files: Record<string, string>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
}

/** A user repository on branch `feature`, with a stash entry, a staged change and an ignored node_modules. */
async function userRepo(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const repo = await tempDir("tiller-rollback-repo-");
  const { dir } = repo;
  await git(dir, "init", "-q", "-b", "main");
  await git(dir, "config", "user.name", "Test User");
  await git(dir, "config", "user.email", "user@example.com");
  await git(dir, "config", "commit.gpgSign", "false");
  await put(dir, { ".gitignore": "node_modules/\n", "README.md": "readme\n" });
  await git(dir, "add", ".");
  await git(dir, "commit", "-q", "-m", "initial");
  await git(dir, "checkout", "-q", "-b", "feature");
  await put(dir, { "README.md": "stashed\n" });
  await git(dir, "stash", "push", "-q");
  await put(dir, { "README.md": "staged\n" });
  await git(dir, "add", "README.md");
  await put(dir, { "node_modules/pkg/index.js": "module\n" });
  return repo;
}

const userState = async (dir: string) => ({
  head: await git(dir, "rev-parse", "HEAD"),
  branch: (await git(dir, "symbolic-ref", "--short", "HEAD")).trim(),
  cached: await git(dir, "diff", "--cached"),
  stash: await git(dir, "stash", "list", "--format=%H %s"),
});

const change = (path: string, content: string): ScriptStep => ({
  type: "file_change",
  path,
  diff: `+${content}`,
  content,
});
const script = keyedScript({
  "[r1]": [change("one.txt", "one\n"), { type: "text", text: "wrote one" }],
  "[r2]": [change("two.txt", "two\n"), change("one.txt", "one changed\n"), { type: "text", text: "wrote two" }],
  "[r3]": [
    change("dir/three.txt", "three\n"),
    change("README.md", "agent readme\n"),
    { type: "text", text: "wrote three" },
  ],
  "[hang]": [{ type: "text", text: "working" }, { type: "hang" }],
});
const tracked = (dir: string) => snapshotFiles(dir, [".git", "node_modules"]);
const run = async (rt: TillerRuntime, threadId: string, text: string) =>
  rt.waitForRun((await rt.sendMessage({ threadId, text })).runId);

/** Runs 1..3 on a thread in a user repository, each writing different files; then a write to node_modules. */
async function threeRuns(caps: CapabilityOverrides) {
  const repo = await userRepo();
  const backend = new ScriptedBackend();
  const t = await openTestRuntime({ s: scripted(caps, script, backend) }, { checkpoints: true });
  const { rt } = t;
  const { threadId } = await rt.createThread({ providerTarget: "s", cwd: repo.dir });
  const before = await userState(repo.dir);
  const r1 = await run(rt, threadId, "[r1] first");
  const afterRun1 = await tracked(repo.dir);
  const r2 = await run(rt, threadId, "[r2] second");
  const r3 = await run(rt, threadId, "[r3] third");
  expect([r1, r2, r3].map((r) => r.status)).toEqual(["completed", "completed", "completed"]);
  expect(await tracked(repo.dir)).toMatchObject({
    "one.txt": "one changed\n",
    "two.txt": "two\n",
    "dir/three.txt": "three\n",
    "README.md": "agent readme\n",
  });
  await put(repo.dir, { "node_modules/pkg/late.js": "late\n" });
  const cleanup = async () => {
    await t.cleanup();
    await repo.cleanup();
  };
  return { ...t, cleanup, dir: repo.dir, backend, threadId, before, afterRun1, r1, r2, r3 };
}

/**
 * What rollback guarantees whatever the provider could do: files as after run 1, the user's git and ignored files
 * untouched.
 */
async function expectFilesRestored(s: Awaited<ReturnType<typeof threeRuns>>) {
  expect(await tracked(s.dir)).toEqual(s.afterRun1);
  expect(await userState(s.dir)).toEqual(s.before);
  expect(s.before.branch).toBe("feature");
  expect(s.before.cached).toContain("+staged");
  expect(s.before.stash).not.toBe("");
  expect(await readFile(join(s.dir, "node_modules/pkg/index.js"), "utf8")).toBe("module\n");
  expect(await readFile(join(s.dir, "node_modules/pkg/late.js"), "utf8")).toBe("late\n");
  const { runs } = await s.rt.readThread(s.threadId);
  expect(runs.map((r) => r.status)).toEqual(["completed", "rolled_back", "rolled_back"]);
  const statuses = (runId: string) => [
    ...new Set(
      s.rt.views
        .checkpointsOf(s.threadId)
        .filter((c) => c.runId === runId)
        .map((c) => c.status),
    ),
  ];
  expect([s.r1, s.r2, s.r3].map((r) => statuses(r.runId))).toEqual([["ready"], ["stale"], ["stale"]]);
}

describe("rollback with git checkpoints in a user repository", () => {
  it("with provider rollback: the provider drops the later turns and the files return to run 1", async () => {
    const s = await threeRuns({});
    const { rt, events, threadId, r1, r2, r3 } = s;
    try {
      expect(rt.affordances(threadId).rollback.find((r) => r.toRunId === r1.runId)).toMatchObject({
        provider: "native",
        available: true,
      });
      expect([...s.backend.threads.values()].flatMap((t) => t.turns)).toHaveLength(3);
      const receipt = await rt.rollback({ threadId, toRunId: r1.runId });
      expect(receipt).toMatchObject({
        threadId,
        toRunId: r1.runId,
        rolledBackRunIds: [r2.runId, r3.runId],
        provider: "rolled_back",
        filesRestored: true,
      });
      expect(receipt.checkpointId).toBe(rt.views.finalCheckpoint(r1.runId)?.checkpointId);
      expect(receipt.files.map((f) => f.path).sort()).toEqual(["README.md", "dir/three.txt", "one.txt", "two.txt"]);
      await expectFilesRestored(s);
      expect([...s.backend.threads.values()].map((t) => t.turns.map((turn) => turn.userText))).toEqual([
        ["[r1] first"],
      ]);
      expect(policies(events, "rollback_divergent")).toEqual([]);

      // The next run continues on the same provider thread, which needs no context.
      const r4 = await run(rt, threadId, "[r4] after");
      expect(r4.status).toBe("completed");
      expect(r4.attempts[0]!.providerThreadId).toBe(r1.attempts[0]!.providerThreadId);
      expect(ofType(events, "handoff.created")).toEqual([]);
      expect([...s.backend.threads.values()].map((t) => t.turns.map((turn) => turn.userText))).toEqual([
        ["[r1] first", "[r4] after"],
      ]);
    } finally {
      await s.cleanup();
    }
  });

  it(
    "without provider rollback: files restored, " + "the provider thread is divergent and rebuilt on the next run",
    async () => {
      const s = await threeRuns({ threads: { canRollbackThread: false } });
      const { rt, events, threadId, r1, r2, r3 } = s;
      try {
        expect(rt.affordances(threadId).rollback.find((r) => r.toRunId === r1.runId)).toMatchObject({
          provider: "divergent",
          available: true,
        });
        const receipt = await rt.rollback({ threadId, toRunId: r1.runId });
        expect(receipt).toMatchObject({
          rolledBackRunIds: [r2.runId, r3.runId],
          provider: "divergent",
          filesRestored: true,
        });
        expect(policies(events, "rollback_divergent").map(row)).toEqual([
          [threadId, r1.runId, "threads.canRollbackThread", "fallback"],
        ]);
        await expectFilesRestored(s);
        const old = r1.attempts[0]!.providerThreadId!;
        expect(ofType(events, "rollback.applied").map((e) => e.divergentProviderThreadIds)).toEqual([[old]]);
        expect([...s.backend.threads.values()].flatMap((t) => t.turns)).toHaveLength(3); // the provider kept them

        const r4 = await run(rt, threadId, "[r4] after");
        expect(r4.status).toBe("completed");
        const bound = ofType(events, "provider_thread.bound");
        expect(bound.map((b) => b.via)).toEqual(["created", "realigned"]);
        expect(bound[1]!.providerThreadId).not.toBe(old);
        expect(r4.attempts[0]!.providerThreadId).toBe(bound[1]!.providerThreadId);
        expect(policies(events, "divergent_thread_rebuilt").map(row)).toEqual([
          [threadId, null, "threads.canRollbackThread", "fallback"],
        ]);
        const handoffs = ofType(events, "handoff.created");
        expect(handoffs.map((h) => [h.reason, h.runId, h.coveredRunIds])).toEqual([
          ["rollback_divergent", r4.runId, [r1.runId]],
        ]);
        const text = handoffs[0]!.text;
        expect(text).toContain("[r1] first");
        for (const gone of ["[r2]", "second", "wrote two", "[r3]", "third", "wrote three"])
          expect(text).not.toContain(gone);
        const fresh = s.backend.threads.get(bound[1]!.resumeCursor)!;
        expect(fresh.turns.map((t) => [t.userText, t.context?.kind])).toEqual([["[r4] after", "rebuild"]]);
      } finally {
        await s.cleanup();
      }
    },
  );

  it(
    "without checkpoints or provider rollback: " + "refused as capability_unsupported; with an active run: conflict",
    async () => {
      const { rt, events, cleanup } = await openTestRuntime(
        { s: scripted({ threads: { canRollbackThread: false } }, script) },
        { checkpoints: false },
      );
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const r1 = await run(rt, threadId, "first");
        await run(rt, threadId, "second");
        expect(rt.affordances(threadId).rollback).toEqual([]);
        const error = await rejectsWith(rt.rollback({ threadId, toRunId: r1.runId }), "capability_unsupported");
        expect(error.details).toMatchObject({ capability: "checkpointing.appCanCheckpointFilesystem" });
        const policy = await nextEvent(rt, "policy.applied", (e) => e.policy === "rollback_unsupported");
        expect(row(policy.event)).toEqual([threadId, r1.runId, "checkpointing.appCanCheckpointFilesystem", "refused"]);
        expect((await rt.readThread(threadId)).runs.map((r) => r.status)).toEqual(["completed", "completed"]);

        const { runId } = await rt.sendMessage({ threadId, text: "[hang]" });
        await streaming(rt, runId);
        await rejectsWith(rt.rollback({ threadId, toRunId: r1.runId }), "conflict");
        expect((await rt.readThread(threadId)).runs.map((r) => r.status)).toEqual([
          "completed",
          "completed",
          "running",
        ]);
        expect(ofType(events, "rollback.applied")).toEqual([]);
      } finally {
        await cleanup();
      }
    },
  );

  it("an active run blocks a rollback that checkpoints could otherwise do (conflict)", async () => {
    const work = await tempDir("tiller-rollback-busy-");
    const { rt, events, cleanup } = await openTestRuntime({ s: scripted({}, script) }, { checkpoints: true });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s", cwd: work.dir });
      const r1 = await run(rt, threadId, "[r1] first");
      const { runId } = await rt.sendMessage({ threadId, text: "[hang]" });
      await streaming(rt, runId);
      expect(rt.affordances(threadId).rollback).toMatchObject([
        { toRunId: r1.runId, available: false, reason: "the thread is busy" },
      ]);
      await rejectsWith(rt.rollback({ threadId, toRunId: r1.runId }), "conflict");
      expect(ofType(events, "rollback.applied")).toEqual([]);
      expect(await readFile(join(work.dir, "one.txt"), "utf8")).toBe("one\n");
    } finally {
      await cleanup();
      await work.cleanup();
    }
  });
});

describe("nested checkpoint scopes", () => {
  it.each([true, false])("supportsNestedCheckpointScopes=%s: a subagent's file change", async (nested) => {
    const work = await tempDir("tiller-nested-");
    const steps: ScriptStep[] = [
      { type: "subagent", agent: "helper", prompt: "write it", steps: [change("sub.txt", "sub\n")] },
      { type: "text", text: "done" },
    ];
    const caps = { checkpointing: { supportsNestedCheckpointScopes: nested } };
    const { rt, events, cleanup } = await openTestRuntime({ s: scripted(caps, () => steps) }, { checkpoints: true });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s", cwd: work.dir });
      const r = await run(rt, threadId, "delegate");
      expect(r.status).toBe("completed");
      expect(await readFile(join(work.dir, "sub.txt"), "utf8")).toBe("sub\n");
      const subagent = r.items.find((i) => i.kind === "subagent")!;
      expect(subagent).toBeDefined();
      const captured = ofType(events, "checkpoint.captured");
      expect(captured.filter((c) => c.scope === "root_run").map((c) => c.phase)).toEqual(["baseline", "final"]);
      expect(captured.find((c) => c.phase === "final" && c.scope === "root_run")!.files.map((f) => f.path)).toEqual([
        "sub.txt",
      ]);
      // Nested scopes are app-owned: the subagent's scope is captured whatever the record says.
      const sub = captured.filter((c) => c.scope === "subagent");
      expect(sub.map((c) => [c.runId, c.nodeId, c.phase])).toEqual([[r.runId, subagent.id, "final"]]);
      expect(sub[0]!.files.map((f) => f.path)).toEqual(["sub.txt"]);
      expect(ofType(events, "checkpoint.skipped")).toEqual([]);
      // The record matters only once the subagent is undone (test/runtime/undoSubagent.test.ts).
      expect(policies(events, "root_checkpoint_only")).toEqual([]);
    } finally {
      await cleanup();
      await work.cleanup();
    }
  });
});

describe("what a rollback restores, and what it never touches", () => {
  it(
    "files ignored through info/exclude or the user's global excludes file " +
      "are never captured, and a rollback leaves them as they are",
    async () => {
      const repo = await userRepo();
      await put(home.home, { ".gitconfig": "[core]\n\texcludesFile = ~/global-ignore\n", "global-ignore": "*.bak\n" });
      await put(repo.dir, { ".git/info/exclude": "*.local\n", "settings.local": "mine\n", "notes.bak": "old notes\n" });
      const { rt, events, cleanup } = await openTestRuntime({ s: scripted({}, script) }, { checkpoints: true });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s", cwd: repo.dir });
        const r1 = await run(rt, threadId, "[r1] first");
        await put(repo.dir, {
          "settings.local": "edited after run 1\n",
          "late.local": "late\n",
          "draft.bak": "draft\n",
        });
        await run(rt, threadId, "[r2] second");
        await put(repo.dir, { "later.local": "later\n" });
        const receipt = await rt.rollback({ threadId, toRunId: r1.runId });
        expect(receipt).toMatchObject({ filesRestored: true });
        expect(receipt.files.map((f) => f.path).sort()).toEqual(["one.txt", "two.txt"]);

        const ignored = ["settings.local", "notes.bak", "late.local", "draft.bak", "later.local"];
        const captured = ofType(events, "checkpoint.captured").flatMap((c) => c.files.map((f) => f.path));
        expect(captured.filter((path) => ignored.includes(path))).toEqual([]);
        expect(await snapshotFiles(repo.dir, [".git", "node_modules"])).toMatchObject({
          "settings.local": "edited after run 1\n",
          "notes.bak": "old notes\n",
          "late.local": "late\n",
          "draft.bak": "draft\n",
          "later.local": "later\n",
          "one.txt": "one\n",
        });
        expect(await readFile(join(home.home, ".gitconfig"), "utf8")).toBe(
          "[core]\n\texcludesFile = ~/global-ignore\n",
        );
      } finally {
        await cleanup();
        await repo.cleanup();
        await rm(join(home.home, ".gitconfig"));
      }
    },
  );

  it("a 0600 file comes back 0600 and a script keeps its exact executable bits", async () => {
    const work = await tempDir("tiller-rollback-modes-");
    await put(work.dir, { "one.txt": "mine\n", "run.sh": "#!/bin/sh\n" });
    await chmod(join(work.dir, "one.txt"), 0o600);
    await chmod(join(work.dir, "run.sh"), 0o750);
    const { rt, cleanup } = await openTestRuntime({ s: scripted({}, script) }, { checkpoints: true });
    const modeOf = async (path: string) => ((await stat(join(work.dir, path))).mode & 0o7777).toString(8);
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s", cwd: work.dir });
      const r1 = await run(rt, threadId, "[r1] first"); // one.txt (0600) rewritten in place: still 0600
      expect(await modeOf("one.txt")).toBe("600");
      await run(rt, threadId, "[r2] second");
      await chmod(join(work.dir, "run.sh"), 0o755);
      const receipt = await rt.rollback({ threadId, toRunId: r1.runId });
      expect(receipt.files.map((f) => f.path).sort()).toEqual(["one.txt", "run.sh", "two.txt"]);
      expect(await readFile(join(work.dir, "one.txt"), "utf8")).toBe("one\n");
      expect([await modeOf("one.txt"), await modeOf("run.sh")]).toEqual(["600", "750"]);
    } finally {
      await cleanup();
      await work.cleanup();
    }
  });

  it("the restore is announced with its files and the rollback's outcome before rollback.applied", async () => {
    const work = await tempDir("tiller-rollback-announce-");
    const { rt, events, cleanup } = await openTestRuntime({ s: scripted({}, script) }, { checkpoints: true });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s", cwd: work.dir });
      const r1 = await run(rt, threadId, "[r1] first");
      const r2 = await run(rt, threadId, "[r2] second");
      const receipt = await rt.rollback({ threadId, toRunId: r1.runId });
      const started = events.filter((r) => r.event.type === "checkpoint.restore_started");
      const applied = events.filter((r) => r.event.type === "rollback.applied");
      expect(started).toHaveLength(1);
      expect(started[0]!.seq).toBeLessThan(applied[0]!.seq);
      expect(started[0]!.event).toEqual({
        type: "checkpoint.restore_started",
        threadId,
        toRunId: r1.runId,
        checkpointId: receipt.checkpointId,
        files: receipt.files,
        rolledBackRunIds: [r2.runId],
        provider: "rolled_back",
        providerThreadId: r1.attempts[0]!.providerThreadId,
        divergentProviderThreadIds: [],
      });
      const {
        type: _started,
        files: _files,
        ...outcome
      } = started[0]!.event as Extract<(typeof started)[0]["event"], { type: "checkpoint.restore_started" }>;
      expect(applied[0]!.event).toEqual({ ...outcome, type: "rollback.applied", files: receipt.files });
      expect(ofType(events, "checkpoint.restore_settled")).toEqual([]);
    } finally {
      await cleanup();
      await work.cleanup();
    }
  });

  it("a restore that fails after its announce names the files left in an unknown state", async () => {
    const work = await tempDir("tiller-rollback-unknown-");
    const double = await gitDouble("fail-after"); // git writes the files, then fails as a git dying part way would
    const restoreEnv = useEnv(double.env); // read when the runtime opens its checkpoint store
    const { rt, events, cleanup } = await openTestRuntime({ s: scripted({}, script) }, { checkpoints: true });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s", cwd: work.dir });
      const r1 = await run(rt, threadId, "[r1] first");
      const r2 = await run(rt, threadId, "[r2] second");
      const receipt = await rt.rollback({ threadId, toRunId: r1.runId });
      expect(receipt).toMatchObject({
        filesRestored: false,
        checkpointId: null,
        files: [],
        rolledBackRunIds: [r2.runId],
      });
      const [announced] = ofType(events, "checkpoint.restore_started");
      expect(announced!.files).toEqual([
        { path: "one.txt", change: "modified" },
        { path: "two.txt", change: "deleted" },
      ]);
      const settled = ofType(events, "checkpoint.restore_settled");
      expect(settled).toMatchObject([
        {
          threadId,
          toRunId: r1.runId,
          checkpointId: announced!.checkpointId,
          outcome: "unknown",
          files: announced!.files,
        },
      ]);
      expect(settled[0]!.message).toMatch(/simulated failure after the write.*one\.txt, two\.txt/);
      expect(ofType(events, "warning").map((w) => w.message)).toEqual([
        expect.stringContaining(`files were not restored to checkpoint ${announced!.checkpointId}`),
      ]);
      expect(ofType(events, "rollback.applied")).toMatchObject([
        { checkpointId: null, files: [], rolledBackRunIds: [r2.runId] },
      ]);
    } finally {
      await cleanup();
      restoreEnv();
      await double.cleanup();
      await work.cleanup();
    }
  });
});
