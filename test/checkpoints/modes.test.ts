import { chmod, mkdir, readFile, rm, stat, unlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { GitCheckpointStore } from "../../src/runtime/checkpoints/gitStore.js";
import { withCheckpointStore } from "./isolated.js";

/**
 * A checkpoint keeps each file's exact permission bits, not only git's "executable or not":
 * a restore gives a 0600 file back 0600 (not 0644 by the umask), a 0700 script 0700, and puts
 * back a mode that drifted while the content stayed.
 */

let cwd: string;
let store: GitCheckpointStore;
withCheckpointStore("tiller-modes-", (f) => ({ cwd, store } = f));

async function put(files: Record<string, readonly [content: string, mode: number]>): Promise<void> {
  for (const [path, [content, mode]] of Object.entries(files)) {
    await mkdir(dirname(join(cwd, path)), { recursive: true });
    await writeFile(join(cwd, path), content);
    await chmod(join(cwd, path), mode);
  }
}

const modeOf = async (path: string) => (await stat(join(cwd, path))).mode & 0o7777;
const paths = (files: Array<{ path: string }>) => files.map((f) => f.path);

describe("checkpoint file modes", () => {
  it(
    "a restore gives every file its exact mode back " + "(0600, 0640, 0700, 0755), whoever rewrote or deleted it",
    async () => {
      const files = {
        "secret.env": ["KEY=1\n", 0o600],
        "group.txt": ["g\n", 0o640],
        "private.sh": ["#!/bin/sh\n", 0o700],
        "run.sh": ["#!/bin/sh\necho\n", 0o755],
        "plain.txt": ["p\n", 0o644],
        "dir/deep.key": ["k\n", 0o400],
      } as const;
      await put(files);
      const one = await store.capture({ cwd, ref: "thr_m/chk_1", parent: null, message: "one" });

      // The agent writes a new file in place of the secret (0644 by the umask), deletes others.
      await unlink(join(cwd, "secret.env"));
      await writeFile(join(cwd, "secret.env"), "KEY=2\n", { mode: 0o644 });
      await chmod(join(cwd, "secret.env"), 0o644);
      await rm(join(cwd, "private.sh"));
      await rm(join(cwd, "dir"), { recursive: true });
      await writeFile(join(cwd, "group.txt"), "g2\n");

      const restored = await store.restore({ cwd, commit: one.commit });
      expect(paths(restored.files)).toEqual(["dir/deep.key", "group.txt", "private.sh", "secret.env"]);
      for (const [path, [content, mode]] of Object.entries(files)) {
        expect([path, await readFile(join(cwd, path), "utf8"), (await modeOf(path)).toString(8)]).toEqual([
          path,
          content,
          mode.toString(8),
        ]);
      }
      // A directory the restore had to create gets the process's default, as git would give it.
      expect(((await stat(join(cwd, "dir"))).mode & 0o777).toString(8)).toBe((0o777 & ~process.umask()).toString(8));
    },
  );

  it("a mode that drifted with the content unchanged is put back, and counted as a change", async () => {
    await put({ "secret.env": ["KEY=1\n", 0o600], tool: ["#!/bin/sh\n", 0o750], "same.txt": ["s\n", 0o644] });
    const one = await store.capture({ cwd, ref: "thr_m/chk_1", parent: null, message: "one" });
    await chmod(join(cwd, "secret.env"), 0o644);
    await chmod(join(cwd, "tool"), 0o755);

    const two = await store.capture({ cwd, ref: "thr_m/chk_2", parent: one.commit, message: "two" });
    expect(two.files).toEqual([
      { path: "secret.env", change: "modified" },
      { path: "tool", change: "modified" },
    ]);

    const restored = await store.restore({ cwd, commit: one.commit });
    expect(restored.files).toEqual([
      { path: "secret.env", change: "modified" },
      { path: "tool", change: "modified" },
    ]);
    expect((await modeOf("secret.env")).toString(8)).toBe("600");
    expect((await modeOf("tool")).toString(8)).toBe("750");
    expect((await modeOf("same.txt")).toString(8)).toBe("644");
    expect((await store.restore({ cwd, commit: one.commit })).files).toEqual([]);
  });

  it("the files about to change are told before the first one changes, and a refusal changes nothing", async () => {
    await put({ "a.txt": ["a\n", 0o600], "b.txt": ["b\n", 0o644] });
    const one = await store.capture({ cwd, ref: "thr_m/chk_1", parent: null, message: "one" });
    await put({ "a.txt": ["a2\n", 0o644], "c.txt": ["c\n", 0o644] });
    await chmod(join(cwd, "b.txt"), 0o600);

    const refused = store.restore({
      cwd,
      commit: one.commit,
      beforeChange: async () => {
        throw new Error("not durable");
      },
    });
    await expect(refused).rejects.toThrow("not durable");
    expect([await readFile(join(cwd, "a.txt"), "utf8"), await modeOf("a.txt"), await modeOf("b.txt")]).toEqual([
      "a2\n",
      0o644,
      0o600,
    ]);

    const told: string[][] = [];
    const restored = await store.restore({
      cwd,
      commit: one.commit,
      beforeChange: async (files) => {
        told.push(paths(files));
        // Nothing has changed yet when the list is given.
        expect([await readFile(join(cwd, "a.txt"), "utf8"), await modeOf("b.txt")]).toEqual(["a2\n", 0o600]);
      },
    });
    expect(told).toEqual([["a.txt", "b.txt", "c.txt"]]);
    expect(paths(restored.files)).toEqual(["a.txt", "b.txt", "c.txt"]);
    expect([await modeOf("a.txt"), await modeOf("b.txt")]).toEqual([0o600, 0o644]);

    // Nothing to change: nobody is told.
    await store.restore({ cwd, commit: one.commit, beforeChange: async () => void told.push(["again"]) });
    expect(told).toHaveLength(1);
  });
});
