import { chmod, mkdir, mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GitCheckpointStore } from "../../src/runtime/checkpoints/gitStore.js";
import { isRunning } from "../../src/runtime/hosts/process.js";
import { gitDouble } from "./gitDouble.js";
import { isolatedHome } from "./isolated.js";

/**
 * The private checkpoint repository is private to its owner (directories 0700, files without
 * group or other bits: 0600, objects 0400) whatever the umask, and its git children do not
 * outlive it: close() kills a git that is still running.
 */

let root: string;
let cwd: string;
let storeDir: string;
let home: Awaited<ReturnType<typeof isolatedHome>>;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "tiller-private-store-"));
  cwd = join(root, "work");
  storeDir = join(root, "data", "checkpoints.git");
  await mkdir(cwd);
  home = await isolatedHome();
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
  await home.cleanup();
});

/** Every entry under `dir` whose mode lets anyone but the owner in. */
async function openToOthers(dir: string): Promise<string[]> {
  const found: string[] = [];
  const top = await stat(dir);
  if ((top.mode & 0o077) !== 0) found.push(`. ${(top.mode & 0o777).toString(8)}`);
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    const path = join(entry.parentPath, entry.name);
    const mode = (await stat(path)).mode & 0o777;
    const wanted = entry.isDirectory() ? mode === 0o700 : (mode & 0o077) === 0;
    if (!wanted) found.push(`${path.slice(dir.length + 1)} ${mode.toString(8)}`);
  }
  return found;
}

async function exercise(store: GitCheckpointStore): Promise<void> {
  await writeFile(join(cwd, "a.txt"), "a\n");
  const one = await store.capture({ cwd, ref: "thr_p/chk_1", parent: null, message: "one" });
  await writeFile(join(cwd, "a.txt"), "b\n");
  await writeFile(join(cwd, "b.txt"), "b\n");
  await store.capture({ cwd, ref: "thr_p/chk_2", parent: one.commit, message: "two" });
  await store.restore({ cwd, commit: one.commit });
}

describe("the private checkpoint repository", () => {
  it("is private to its owner whatever the umask: directories 0700, files 0600, objects 0400", async () => {
    const umask = process.umask(0o002); // the loosest umask a user might run with
    try {
      const store = await GitCheckpointStore.open(storeDir, { env: home.env });
      await exercise(store);
      await store.close();
    } finally {
      process.umask(umask);
    }
    expect(await openToOthers(storeDir)).toEqual([]);
    const objects = (await readdir(join(storeDir, "objects"), { recursive: true, withFileTypes: true })).filter((e) =>
      e.isFile(),
    );
    expect(objects.length).toBeGreaterThan(0);
  });

  it("a store written before it was private is tightened when opened", async () => {
    const first = await GitCheckpointStore.open(storeDir, { env: home.env });
    await exercise(first);
    await first.close();
    // As an older runtime left it: world-readable.
    await chmod(storeDir, 0o755);
    for (const entry of await readdir(storeDir, { withFileTypes: true, recursive: true })) {
      await chmod(join(entry.parentPath, entry.name), entry.isDirectory() ? 0o755 : 0o644);
    }
    const again = await GitCheckpointStore.open(storeDir, { env: home.env });
    await again.close();
    expect(await openToOthers(storeDir)).toEqual([]);
  });

  it("close() kills a git that is still running: the operation rejects as closed and the process is gone", async () => {
    const git = await gitDouble("hold");
    try {
      const store = await GitCheckpointStore.open(storeDir, { env: { ...home.env, ...git.env } });
      await writeFile(join(cwd, "a.txt"), "a\n");
      const one = await store.capture({ cwd, ref: "thr_p/chk_1", parent: null, message: "one" });
      await writeFile(join(cwd, "a.txt"), "b\n");
      const restoring = store.restore({ cwd, commit: one.commit });
      const pid = await git.held;
      expect(isRunning(pid)).toBe(true);
      await store.close();
      await expect(restoring).rejects.toMatchObject({ code: "closed" });
      await git.gone;
      expect(isRunning(pid)).toBe(false);
      await expect(store.capture({ cwd, ref: "thr_p/chk_2", parent: null, message: "x" })).rejects.toMatchObject({
        code: "closed",
      });
    } finally {
      await git.cleanup();
    }
  });
});
