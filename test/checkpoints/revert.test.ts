import { chmod, mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { GitCheckpointStore } from "../../src/runtime/checkpoints/gitStore.js";
import { snapshotFiles } from "../support/files.js";
import { withCheckpointStore } from "./isolated.js";

/**
 * `revert`: undoing what changed between two checkpoints (a nested scope's start and end) and
 * nothing else, only while those files are as the scope left them.
 */

let cwd: string;
let store: GitCheckpointStore;
withCheckpointStore("tiller-revert-", (f) => ({ cwd, store } = f));

async function put(files: Record<string, string>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(cwd, path)), { recursive: true });
    await writeFile(join(cwd, path), content);
  }
}

const capture = (ref: string, parent: string | null) => store.capture({ cwd, ref, parent, message: ref });
const modeOf = async (path: string) => (await stat(join(cwd, path))).mode & 0o777;

describe("GitCheckpointStore.revert", () => {
  it("puts back only the scope's files, contents and modes, and leaves later edits elsewhere", async () => {
    await put({ "keep.txt": "keep\n", "edit.txt": "before\n", "gone.txt": "gone\n", ".gitignore": "*.log\n" });
    await chmod(join(cwd, "edit.txt"), 0o600);
    const start = await capture("t/start", null);
    // The scope: edits a file (and its mode), deletes one, adds one in a new directory.
    await put({ "edit.txt": "during\n", "new/deep/added.txt": "added\n" });
    await chmod(join(cwd, "edit.txt"), 0o640);
    await rm(join(cwd, "gone.txt"));
    const end = await capture("t/end", start.commit);
    // After the scope: other work, and ignored content the store never touches.
    await put({ "keep.txt": "kept later\n", "later.txt": "later\n", "debug.log": "log\n" });

    const announced: string[][] = [];
    const { files, conflicts } = await store.revert({
      cwd,
      from: start.commit,
      to: end.commit,
      beforeChange: async (changing) => void announced.push(changing.map((f) => f.path)),
    });
    expect(conflicts).toEqual([]);
    expect(files).toEqual([
      { path: "edit.txt", change: "modified" },
      { path: "gone.txt", change: "added" },
      { path: "new/deep/added.txt", change: "deleted" },
    ]);
    expect(announced).toEqual([["edit.txt", "gone.txt", "new/deep/added.txt"]]);
    expect(await snapshotFiles(cwd)).toEqual({
      ".gitignore": "*.log\n",
      "keep.txt": "kept later\n",
      "edit.txt": "before\n",
      "gone.txt": "gone\n",
      "later.txt": "later\n",
      "debug.log": "log\n",
    });
    expect(await modeOf("edit.txt")).toBe(0o600);
    // The directories the scope created went with its file.
    await expect(stat(join(cwd, "new"))).rejects.toThrow();
    // Reverted already: nothing more to do.
    expect(await store.revert({ cwd, from: start.commit, to: end.commit })).toEqual({ files: [], conflicts: [] });
  });

  it("a scope file changed since the scope ended is a conflict: nothing is changed", async () => {
    await put({ "a.txt": "a0\n", "b.txt": "b0\n" });
    const start = await capture("t/start", null);
    await put({ "a.txt": "a1\n", "b.txt": "b1\n" });
    const end = await capture("t/end", start.commit);
    await put({ "b.txt": "someone else's\n" });
    const result = await store.revert({ cwd, from: start.commit, to: end.commit });
    expect(result).toEqual({ files: [], conflicts: [{ path: "b.txt", change: "modified" }] });
    expect([await readFile(join(cwd, "a.txt"), "utf8"), await readFile(join(cwd, "b.txt"), "utf8")]).toEqual([
      "a1\n",
      "someone else's\n",
    ]);
    // A file already back as the scope found it is no conflict: it is left as it is.
    await put({ "b.txt": "b0\n" });
    expect((await store.revert({ cwd, from: start.commit, to: end.commit })).files).toEqual([
      { path: "a.txt", change: "modified" },
    ]);
    expect(await readFile(join(cwd, "a.txt"), "utf8")).toBe("a0\n");
  });
});
