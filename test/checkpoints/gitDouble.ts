import { execFile } from "node:child_process";
import { constants, createReadStream } from "node:fs";
import { chmod, mkdtemp, open, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";

const exec = promisify(execFile);

/**
 * A `git` first on PATH (the process boundary, not a seam in the runtime): the real git,
 * except for a restore's work-tree write (`read-tree -m -u`), which
 * - `hold`: writes its pid to a FIFO and blocks with the FIFO still open for writing, so the
 *   reader learns the exact moment the restore is held (after the runtime announced it
 *   durably) and, by end of file, the exact moment that git process is gone: no sleeps, no polling;
 * - `hold-after`: the same once the real write is done (files already restored);
 * - `fail-after`: does the real write, then fails as a git that died part way would.
 */
const SCRIPT = `#!/bin/sh
case " $* " in
  *" read-tree -m -u "*)
    case "$TILLER_TEST_GIT_RESTORE" in
      hold-after|fail-after) "$TILLER_TEST_REAL_GIT" "$@" || exit $?;;
    esac
    if [ "$TILLER_TEST_GIT_RESTORE" = fail-after ]; then
      echo "fatal: simulated failure after the write" >&2; exit 128
    fi
    exec 9>"$TILLER_TEST_GIT_HOLD"
    echo $$ >&9
    exec 8<"$TILLER_TEST_GIT_HOLD.never"
    exit 1;;
esac
exec "$TILLER_TEST_REAL_GIT" "$@"
`;

export type RestoreBehaviour = "hold" | "hold-after" | "fail-after";

export interface GitDouble {
  /** Environment variables to give the process whose git this is (PATH first). */
  env: Record<string, string>;
  /** Resolves with the held git's pid once a restore's work-tree write is held. */
  held: Promise<number>;
  /** Resolves when the held git process has exited (every writer of the FIFO closed it). */
  gone: Promise<void>;
  cleanup: () => Promise<void>;
}

export async function gitDouble(restore: RestoreBehaviour = "hold"): Promise<GitDouble> {
  const dir = await mkdtemp(join(tmpdir(), "tiller-git-double-"));
  const realGit = (await exec("sh", ["-c", "command -v git"])).stdout.trim();
  await writeFile(join(dir, "git"), SCRIPT);
  await chmod(join(dir, "git"), 0o755);
  const fifo = join(dir, "hold");
  await exec("mkfifo", [fifo, `${fifo}.never`]);
  const env = {
    PATH: `${dir}:${process.env.PATH ?? ""}`,
    TILLER_TEST_REAL_GIT: realGit,
    TILLER_TEST_GIT_HOLD: fifo,
    TILLER_TEST_GIT_RESTORE: restore,
  };
  // Opening a FIFO for reading waits for its writer: the held git.
  const stream = createReadStream(fifo, { encoding: "utf8" });
  const gone = new Promise<void>((resolve) => stream.on("close", () => resolve()));
  let heldPid: number | null = null;
  const held = new Promise<number>((resolve, reject) => {
    const lines = createInterface({ input: stream });
    lines.once("line", (line) => resolve((heldPid = Number(line.trim()))));
    stream.once("error", reject);
  });
  const cleanup = async () => {
    // A test that failed may leave the git held: it is ours to end, by its pid.
    if (heldPid !== null) {
      try {
        process.kill(heldPid, "SIGKILL");
      } catch {
        // gone already
      }
    }
    // A reader still waiting for a writer (no git was held) would hold a libuv thread: release it.
    const writer = await open(fifo, constants.O_WRONLY | constants.O_NONBLOCK).catch(() => null);
    await writer?.close();
    await gone;
    await rm(dir, { recursive: true, force: true });
  };
  return { env, held, gone, cleanup };
}
