import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GitProcesses, type GitSpawn } from "../../src/runtime/checkpoints/gitProcess.js";
import { isolatedHome } from "./isolated.js";

/**
 * The checkpoint store's git children (gitProcess.ts), against the real git and, for what git never does on demand, a
 * `git` first on PATH.
 */

let dir: string;
let home: Awaited<ReturnType<typeof isolatedHome>>;
const git = new GitProcesses();

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "tiller-git-process-"));
  home = await isolatedHome();
});
afterEach(async () => {
  await home.cleanup();
  await rm(dir, { recursive: true, force: true });
});

const call = (args: string[], more: Partial<GitSpawn> = {}): GitSpawn => ({
  config: [],
  args,
  env: home.env,
  cwd: dir,
  ...more,
});

/** A `git` that runs this shell script instead (the process boundary), found first on PATH. */
async function fakeGit(script: string): Promise<NodeJS.ProcessEnv> {
  const bin = join(dir, "bin");
  await mkdir(bin, { recursive: true });
  await writeFile(join(bin, "git"), `#!/bin/sh\n${script}\n`);
  await chmod(join(bin, "git"), 0o755);
  return { ...home.env, PATH: `${bin}:${process.env.PATH ?? ""}` };
}

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (error: unknown) => error as Error & { code: string; details: Record<string, unknown> },
  );

describe("git processes of the checkpoint store", () => {
  it("hands git its input and returns its output exactly as written (final newline kept)", async () => {
    const result = await git.run(call(["hash-object", "--stdin"], { input: "hello\n" }));
    expect(result).toEqual({ stdout: "ce013625030ba8dba906f756967f9e9ca394464a\n", code: 0 });
  });

  it(
    "an exit code listed as an answer resolves; " + "unlisted, it fails typed with git's exit code and stderr",
    async () => {
      expect(await git.run(call(["config", "--get", "tiller.absent"], { okCodes: [1] }))).toEqual({
        stdout: "",
        code: 1,
      });
      const error = await failure(git.run(call(["cat-file", "-p", "0000000000000000000000000000000000000000"])));
      expect(error?.code).toBe("checkpoint_failed");
      expect(error?.message).toMatch(/^git cat-file failed: fatal:/);
      expect(error?.details).toMatchObject({
        args: ["cat-file", "-p", "0000000000000000000000000000000000000000"],
        exitCode: 128,
        stderr: expect.stringMatching(/^fatal:/),
      });
    },
  );

  it("git gets exactly the environment the store built, nothing more of this process's", async () => {
    process.env.TILLER_TEST_EMBEDDER_SECRET = "sk-embedder-secret";
    try {
      const env = await fakeGit("env");
      const { stdout } = await git.run(
        call(["status"], { env: { ...env, TILLER_TEST_STORE_SETTING: "set-by-store" } }),
      );
      expect(stdout).toContain("TILLER_TEST_STORE_SETTING=set-by-store");
      expect(stdout).not.toContain("sk-embedder-secret");
    } finally {
      delete process.env.TILLER_TEST_EMBEDDER_SECRET;
    }
  });

  it("a git that writes a flood of diagnostics runs to its end; what is kept of them is capped", async () => {
    const flood = "head -c 1000000 /dev/zero | tr '\\0' x >&2";
    expect(await git.run(call(["status"], { env: await fakeGit(`${flood}; echo done`) }))).toEqual({
      stdout: "done\n",
      code: 0,
    });
    const error = await failure(git.run(call(["status"], { env: await fakeGit(`${flood}; exit 7`) })));
    expect(error?.details).toMatchObject({ exitCode: 7 });
    expect(String(error?.details.stderr).length).toBeLessThanOrEqual(2048);
  });

  it("no git to run fails typed (checkpoint_failed), not with a raw spawn error", async () => {
    const empty = join(dir, "empty");
    await mkdir(empty);
    const error = await failure(git.run(call(["status"], { env: { ...home.env, PATH: empty } })));
    expect(error?.code).toBe("checkpoint_failed");
    expect(error?.message).toMatch(/^could not run git: /);
  });
});
