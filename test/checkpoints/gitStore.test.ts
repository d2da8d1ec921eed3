import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { GitCheckpointStore } from "../../src/runtime/checkpoints/gitStore.js";
import { gitIn, snapshotFiles } from "../support/files.js";
import { withCheckpointStore, type StoreFixture } from "./isolated.js";

let root: string;
let cwd: string;
let store: GitCheckpointStore;
let home: StoreFixture["home"];
withCheckpointStore("tiller-checkpoints-", (f) => ({ root, cwd, store, home } = f));

const userGit = (...args: string[]) => gitIn(cwd, ...args);

async function put(files: Record<string, string | Buffer>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(cwd, path)), { recursive: true });
    await writeFile(join(cwd, path), content);
  }
}

/** Every file under cwd (path -> content), skipping the top-level names in `skip`. */
const snapshot = (skip: string[] = []) => snapshotFiles(cwd, skip);

/** Directories under cwd (relative), to prove restores leave no empty ones behind. */
async function directories(skip: string[] = []): Promise<string[]> {
  const entries = await readdir(cwd, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isDirectory())
    .map((entry) => join(entry.parentPath, entry.name).slice(cwd.length + 1))
    .filter((path) => !skip.some((name) => path === name || path.startsWith(`${name}/`)))
    .sort();
}

describe("GitCheckpointStore", () => {
  it("captures, diffs against the parent, and restores the first checkpoint exactly", async () => {
    await put({
      "a.txt": "1\n2\n3\n",
      "dir/b.txt": "b\n",
      "bin.dat": Buffer.from([0, 1, 2, 0, 255]),
      "crlf.txt": "one\r\ntwo\r\n",
      ".gitattributes": "* text=auto eol=lf\n",
    });
    const first = await snapshot();
    const one = await store.capture({ cwd, ref: "thr_1/chk_1", parent: null, message: "one" });
    expect(one.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(one.files).toEqual([
      { path: ".gitattributes", change: "added" },
      { path: "a.txt", change: "added" },
      { path: "bin.dat", change: "added" },
      { path: "crlf.txt", change: "added" },
      { path: "dir/b.txt", change: "added" },
    ]);
    expect(one).toMatchObject({ insertions: 1 + 3 + 2 + 1, deletions: 0 }); // binary counts 0

    await put({ "a.txt": "1\nTWO\n3\n4\n", "new/deep/c.txt": "c\n", "crlf.txt": "one\r\n" });
    await rm(join(cwd, "dir"), { recursive: true });
    const two = await store.capture({ cwd, ref: "thr_1/chk_2", parent: one.commit, message: "two" });
    expect(two.files).toEqual([
      { path: "a.txt", change: "modified" },
      { path: "crlf.txt", change: "modified" },
      { path: "dir/b.txt", change: "deleted" },
      { path: "new/deep/c.txt", change: "added" },
    ]);
    expect(two).toMatchObject({ insertions: 2 + 1, deletions: 1 + 1 + 1 });

    const restored = await store.restore({ cwd, commit: one.commit });
    expect(restored.files).toEqual([
      { path: "a.txt", change: "modified" },
      { path: "crlf.txt", change: "modified" },
      { path: "dir/b.txt", change: "added" },
      { path: "new/deep/c.txt", change: "deleted" },
    ]);
    expect(await snapshot()).toEqual(first); // byte-exact, CRLF kept despite .gitattributes
    expect(await directories()).toEqual(["dir"]); // new/ and new/deep/ removed

    // And forward again to the second checkpoint.
    await store.restore({ cwd, commit: two.commit });
    expect(await readFile(join(cwd, "new/deep/c.txt"), "utf8")).toBe("c\n");
    expect(await directories()).toEqual(["new", "new/deep"]);
  });

  it("never touches the user's repository, index, stash or ignored files", async () => {
    await userGit("init", "-q", "-b", "main");
    await userGit("config", "user.name", "User");
    await userGit("config", "user.email", "user@example.com");
    await userGit("config", "commit.gpgsign", "false");
    await put({ ".gitignore": "node_modules/\n", "tracked.txt": "v1\n", "other.txt": "o\n" });
    await userGit("add", ".");
    await userGit("commit", "-q", "-m", "initial");
    await userGit("checkout", "-q", "-b", "feature");
    await put({ "tracked.txt": "stashed\n" });
    await userGit("stash", "push", "-q");
    await put({ "tracked.txt": "staged\n", "node_modules/pkg/index.js": "early\n" });
    await userGit("add", "tracked.txt");
    await put({ "tracked.txt": "working\n" });

    const userState = async () => ({
      head: await userGit("rev-parse", "HEAD"),
      branch: await userGit("symbolic-ref", "--short", "HEAD"),
      cached: await userGit("diff", "--cached"),
      indexEntries: await userGit("ls-files", "--stage"),
      stash: await userGit("stash", "list", "--format=%H %s"),
      refs: await userGit("for-each-ref", "--format=%(refname) %(objectname)"),
      objects: (await userGit("count-objects", "-v")).replace(/^size.*$/gm, ""),
    });
    const before = await userState();
    const first = await snapshot([".git", "node_modules"]);

    const one = await store.capture({ cwd, ref: "thr_u/chk_1", parent: null, message: "one" });
    expect(one.files.map((file) => file.path)).toEqual([".gitignore", "other.txt", "tracked.txt"]);

    await put({ "tracked.txt": "changed by agent\n", "fresh.txt": "new\n" });
    await put({ "node_modules/pkg/index.js": "later\n", "node_modules/pkg/extra.js": "x\n" });
    await rm(join(cwd, "other.txt"));
    const two = await store.capture({ cwd, ref: "thr_u/chk_2", parent: one.commit, message: "two" });
    expect(two.files).toEqual([
      { path: "fresh.txt", change: "added" },
      { path: "other.txt", change: "deleted" },
      { path: "tracked.txt", change: "modified" },
    ]);

    const restored = await store.restore({ cwd, commit: one.commit });
    expect(restored.files.map((file) => file.path)).toEqual(["fresh.txt", "other.txt", "tracked.txt"]);
    expect(await snapshot([".git", "node_modules"])).toEqual(first);
    expect(await readFile(join(cwd, "node_modules/pkg/index.js"), "utf8")).toBe("later\n");
    expect(await readFile(join(cwd, "node_modules/pkg/extra.js"), "utf8")).toBe("x\n");

    const after = await userState();
    expect(after).toEqual(before);
    expect(after.branch.trim()).toBe("feature");
    expect(after.cached).toContain("+staged");
    expect(after.stash).toContain("WIP on feature");
    expect(after.refs).not.toMatch(/tiller/);
    await expect(userGit("cat-file", "-e", one.commit)).rejects.toThrow();
    // The user's view: the working-tree change relative to their index is the checkpoint's content.
    expect(await userGit("diff")).toContain("+working");
  });

  it("keeps excluded paths and nested repositories out of captures and restores", async () => {
    await put({ "a.txt": "a\n", ".tiller/db.json": "{}\n", "nested/inner.txt": "inner\n" });
    await gitIn(join(cwd, "nested"), "init", "-q"); // no commits: `add` alone would fail
    const one = await store.capture({
      cwd,
      ref: "thr_e/chk_1",
      parent: null,
      message: "one",
      exclude: [".tiller"],
    });
    expect(one.files).toEqual([{ path: "a.txt", change: "added" }]);

    await put({ "a.txt": "changed\n", ".tiller/db.json": '{"v":2}\n', ".tiller/log.jsonl": "x\n" });
    await put({ "nested/inner.txt": "inner changed\n" });
    const restored = await store.restore({ cwd, commit: one.commit, exclude: [".tiller"] });
    expect(restored.files).toEqual([{ path: "a.txt", change: "modified" }]);
    expect(await readFile(join(cwd, "a.txt"), "utf8")).toBe("a\n");
    expect(await snapshot(["nested"])).toEqual({
      "a.txt": "a\n",
      ".tiller/db.json": '{"v":2}\n',
      ".tiller/log.jsonl": "x\n",
    });
    expect(await readFile(join(cwd, "nested/inner.txt"), "utf8")).toBe("inner changed\n");
  });

  it("drops a path from later captures once it is excluded, and restore then leaves it alone", async () => {
    await put({ "a.txt": "a\n", ".tiller/db.json": "{}\n" });
    const one = await store.capture({ cwd, ref: "thr_s/chk_1", parent: null, message: "one" });
    expect(one.files.map((file) => file.path)).toEqual([".tiller/db.json", "a.txt"]);

    const two = await store.capture({
      cwd,
      ref: "thr_s/chk_2",
      parent: one.commit,
      message: "two",
      exclude: [".tiller/"],
    });
    expect(two.files).toEqual([{ path: ".tiller/db.json", change: "deleted" }]);

    // Restoring a checkpoint that holds the excluded path must not write it.
    await put({ ".tiller/db.json": "live\n" });
    await store.restore({ cwd, commit: one.commit, exclude: [".tiller"] });
    expect(await readFile(join(cwd, ".tiller/db.json"), "utf8")).toBe("live\n");

    // Same for a path that a later .gitignore ignores.
    const exclude = [".tiller"];
    await put({ "build/out.js": "v1\n" });
    const three = await store.capture({ cwd, ref: "thr_s/chk_3", parent: two.commit, message: "3", exclude });
    expect(three.files).toEqual([{ path: "build/out.js", change: "added" }]);
    await put({ ".gitignore": "build/\n", "build/out.js": "v2\n" });
    const four = await store.capture({ cwd, ref: "thr_s/chk_4", parent: three.commit, message: "4", exclude });
    expect(four.files).toEqual([
      { path: ".gitignore", change: "added" },
      { path: "build/out.js", change: "deleted" },
    ]);
    await store.restore({ cwd, commit: three.commit, exclude });
    expect(await readFile(join(cwd, "build/out.js"), "utf8")).toBe("v2\n");
    await expect(readFile(join(cwd, ".gitignore"), "utf8")).rejects.toThrow();
  });

  it("rejects unknown commits and bad input with typed errors; has() reports presence", async () => {
    await put({ "a.txt": "a\n" });
    const one = await store.capture({ cwd, ref: "thr_h/chk_1", parent: null, message: "one" });
    expect(await store.has(one.commit)).toBe(true);
    expect(await store.has("0".repeat(40))).toBe(false);
    expect(await store.has("HEAD")).toBe(false);

    await expect(store.restore({ cwd, commit: "0".repeat(40) })).rejects.toMatchObject({
      code: "checkpoint_failed",
    });
    await expect(store.capture({ cwd, ref: "chk", parent: "f".repeat(40), message: "x" })).rejects.toMatchObject({
      code: "checkpoint_failed",
    });
    for (const ref of ["", "a..b", "a//b", "/a", "a/", "a b", "a.lock", "../x"]) {
      await expect(store.capture({ cwd, ref, parent: null, message: "x" })).rejects.toMatchObject({
        code: "invalid_input",
      });
    }
    for (const exclude of ["..", "../x", "/abs", "", "."]) {
      await expect(
        store.capture({ cwd, ref: "ok", parent: null, message: "x", exclude: [exclude] }),
      ).rejects.toMatchObject({ code: "invalid_input" });
    }
    await expect(
      store.capture({ cwd: join(root, "missing"), ref: "ok", parent: null, message: "x" }),
    ).rejects.toMatchObject({ code: "checkpoint_failed" });
    expect(await readFile(join(cwd, "a.txt"), "utf8")).toBe("a\n");

    // A reopened store still has the pinned commit.
    await store.close();
    await expect(store.has(one.commit)).rejects.toMatchObject({ code: "closed" });
    store = await GitCheckpointStore.open(join(root, "data", "checkpoints.git"), { env: home.env });
    expect(await store.has(one.commit)).toBe(true);
  });

  it("lists only what changed since the parent; without a parent, everything", async () => {
    await put({ "a.txt": "a\n", "b.txt": "b\n", "c/d.txt": "d\n" });
    const one = await store.capture({ cwd, ref: "thr_p/chk_1", parent: null, message: "one" });
    await put({ "b.txt": "b\nb2\n" });
    const two = await store.capture({ cwd, ref: "thr_p/chk_2", parent: one.commit, message: "two" });
    expect(two.files).toEqual([{ path: "b.txt", change: "modified" }]);
    expect(two).toMatchObject({ insertions: 1, deletions: 0 });

    const orphan = await store.capture({ cwd, ref: "thr_p/chk_3", parent: null, message: "three" });
    expect(orphan.files.map((file) => file.path)).toEqual(["a.txt", "b.txt", "c/d.txt"]);
    expect(orphan.insertions).toBe(4);

    // Nothing changed: an empty diff against the parent, and a no-op restore.
    const same = await store.capture({ cwd, ref: "thr_p/chk_4", parent: two.commit, message: "four" });
    expect(same).toMatchObject({ files: [], insertions: 0, deletions: 0 });
    expect(await store.restore({ cwd, commit: two.commit })).toEqual({ files: [] });
  });

  it("serializes concurrent operations", async () => {
    await put({ "a.txt": "a\n" });
    const results = await Promise.all(
      ["x1", "x2", "x3"].map((name) => store.capture({ cwd, ref: `thr_c/${name}`, parent: null, message: name })),
    );
    const trees = new Set(results.map((result) => result.files.map((file) => file.path).join()));
    expect(trees).toEqual(new Set(["a.txt"]));
    for (const result of results) expect(await store.has(result.commit)).toBe(true);
  });
});
