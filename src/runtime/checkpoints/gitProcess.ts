/**
 * The git children of the checkpoint store, kept on a short leash. A git left running after
 * the runtime is gone would go on rewriting the work tree or the private index while the next
 * runtime recovers the same directory, so:
 * - each child runs in its own process group, and `killAll` (the store's close) kills the
 *   group, whatever the child started;
 * - on Linux each child runs under `setpriv --pdeathsig KILL`, so the kernel kills it the
 *   moment the runtime's process dies, however it dies (SIGKILL included). Where setpriv is
 *   missing (other systems), a child outlives a killed runtime until its git call ends.
 * execa runs them; the kill is ours (`killAll`): execa's kill signals the leader alone.
 */
import type { Readable } from "node:stream";
import { execa, type Result, type ResultPromise } from "execa";
import { CheckpointError, ClosedError } from "../../domain/errors.js";

export interface GitResult {
  stdout: string;
  code: number;
}

export interface GitSpawn {
  /** `-c key=value` pairs, before the subcommand. */
  config: string[];
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  input?: string;
  /** Exit codes that are answers rather than failures (e.g. 1 from `rev-parse --quiet`). */
  okCodes?: number[];
  /** Files git creates get no group/other bits (the caller sets the exact modes afterwards). */
  privateUmask?: boolean;
}

const STDERR_LIMIT = 2048;
const POSIX = process.platform !== "win32";
/** Runs the rest of its arguments with umask 077; "$@" keeps them arguments, never shell text. */
const PRIVATE_UMASK = ["sh", "-c", 'umask 077 && exec "$@"', "sh"];

let deathLink: Promise<string[]> | null = null;

/** `setpriv --pdeathsig KILL --` where it works (probed once per process), else nothing. */
function deathLinkedLauncher(): Promise<string[]> {
  deathLink ??= (async () => {
    if (process.platform !== "linux") return [];
    const launcher = ["setpriv", "--pdeathsig", "KILL", "--"];
    const probe = await execa(launcher[0]!, [...launcher.slice(1), "true"], { stdio: "ignore", reject: false });
    return probe.exitCode === 0 ? launcher : [];
  })();
  return deathLink;
}

export class GitProcesses {
  readonly #live = new Set<ResultPromise>();
  #closed = false;

  /** Runs git; rejects with CheckpointError on failure, ClosedError once `killAll` ran. */
  async run(call: GitSpawn): Promise<GitResult> {
    const launcher = await deathLinkedLauncher();
    if (this.#closed) throw new ClosedError("checkpoint store");
    const command = [
      ...(call.privateUmask && POSIX ? PRIVATE_UMASK : []),
      ...launcher,
      "git",
      ...call.config,
      ...call.args,
    ];
    const child = execa(command[0]!, command.slice(1), {
      cwd: call.cwd,
      env: call.env,
      extendEnv: false, // the store builds git's whole environment
      windowsHide: true,
      detached: POSIX,
      input: call.input ?? "", // git may exit before reading it: the exit code tells
      stripFinalNewline: false, // callers parse git's output exactly
      // stdout is collected whole, as git wrote it (execa's cap would kill git mid-write);
      // stderr is read here under a cap instead (over execa's cap, git would be killed too).
      maxBuffer: { stdout: Number.POSITIVE_INFINITY },
      buffer: { stderr: false },
      reject: false, // failures are mapped below, by exit code and signal
    });
    this.#live.add(child);
    const stderr = readCapped(child.stderr, STDERR_LIMIT * 2);
    try {
      return this.#settle(call, await child, stderr());
    } finally {
      this.#live.delete(child);
    }
  }

  #settle(call: GitSpawn, result: Result, stderr: string): GitResult {
    if (result.exitCode === undefined && result.signal === undefined) {
      // No process, or an error around it (its `error` event).
      throw new CheckpointError(
        `could not run git: ${result.originalMessage ?? result.message ?? "no process was created"}`,
        { args: call.args },
      );
    }
    const signal = result.signal ?? null;
    if (this.#closed && signal !== null) throw new ClosedError("checkpoint store");
    const exit = result.exitCode ?? -1;
    if (exit === 0 || call.okCodes?.includes(exit)) return { stdout: String(result.stdout ?? ""), code: exit };
    const detail = stderr.trim().slice(0, STDERR_LIMIT);
    const what = signal ? `killed by ${signal}` : (detail.split("\n")[0] ?? "");
    throw new CheckpointError(`git ${call.args[0] ?? ""} failed: ${what}`.trim(), {
      args: call.args,
      exitCode: exit,
      stderr: detail,
    });
  }

  /** Kills every running git (its whole process group); later calls reject with ClosedError. */
  killAll(): void {
    this.#closed = true;
    for (const child of this.#live) {
      try {
        if (POSIX && child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
        else child.kill("SIGKILL");
      } catch {
        // Already gone.
      }
    }
  }
}

/** Collects a stream's text up to `limit` characters and reads (and drops) the rest. */
function readCapped(stream: Readable, limit: number): () => string {
  let text = "";
  stream.on("data", (chunk: Buffer) => {
    if (text.length < limit) text += chunk.toString("utf8");
  });
  return () => text;
}
