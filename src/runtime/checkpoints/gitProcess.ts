/**
 * The git children of the checkpoint store, kept on a short leash. A git left running after
 * the runtime is gone would go on rewriting the work tree or the private index while the next
 * runtime recovers the same directory, so:
 * - each child runs in its own process group, and `killAll` (the store's close) kills the
 *   group, whatever the child started;
 * - on Linux each child runs under `setpriv --pdeathsig KILL`, so the kernel kills it the
 *   moment the runtime's process dies, however it dies (SIGKILL included). Where setpriv is
 *   missing (other systems), a child outlives a killed runtime until its git call ends.
 */
import { spawn, type ChildProcess } from "node:child_process";
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
  deathLink ??= new Promise((resolve) => {
    if (process.platform !== "linux") return resolve([]);
    const launcher = ["setpriv", "--pdeathsig", "KILL", "--"];
    const probe = spawn(launcher[0]!, [...launcher.slice(1), "true"], { stdio: "ignore" });
    probe.on("error", () => resolve([]));
    probe.on("close", (code) => resolve(code === 0 ? launcher : []));
  });
  return deathLink;
}

export class GitProcesses {
  readonly #live = new Set<ChildProcess>();
  #closed = false;

  /** Runs git; rejects with CheckpointError on failure, ClosedError once `killAll` ran. */
  async run(call: GitSpawn): Promise<GitResult> {
    const launcher = await deathLinkedLauncher();
    if (this.#closed) throw new ClosedError("checkpoint store");
    const command = [...(call.privateUmask && POSIX ? PRIVATE_UMASK : []), ...launcher, "git", ...call.config, ...call.args];
    return new Promise<GitResult>((resolvePromise, reject) => {
      const child = spawn(command[0]!, command.slice(1), { cwd: call.cwd, env: call.env, windowsHide: true, detached: POSIX });
      this.#live.add(child);
      const out: Buffer[] = [];
      let stderr = "";
      child.stdout!.on("data", (chunk: Buffer) => out.push(chunk));
      child.stderr!.on("data", (chunk: Buffer) => {
        if (stderr.length < STDERR_LIMIT * 2) stderr += chunk.toString("utf8");
      });
      child.stdin!.on("error", () => undefined); // git may exit before reading stdin; the exit code tells
      child.on("error", (error) => {
        this.#live.delete(child);
        reject(new CheckpointError(`could not run git: ${error.message}`, { args: call.args }));
      });
      child.on("close", (code, signal) => {
        this.#live.delete(child);
        if (this.#closed && signal !== null) return reject(new ClosedError("checkpoint store"));
        const exit = code ?? -1;
        if (exit === 0 || call.okCodes?.includes(exit)) {
          resolvePromise({ stdout: Buffer.concat(out).toString("utf8"), code: exit });
          return;
        }
        const detail = stderr.trim().slice(0, STDERR_LIMIT);
        const what = signal ? `killed by ${signal}` : (detail.split("\n")[0] ?? "");
        reject(new CheckpointError(`git ${call.args[0] ?? ""} failed: ${what}`.trim(), { args: call.args, exitCode: exit, stderr: detail }));
      });
      child.stdin!.end(call.input ?? "");
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
