import { readdirSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import type { Readable } from "node:stream";
import { execa } from "execa";
import { HostUnavailableError } from "../../domain/errors.js";
import type { SpawnedHost, SpawnSpec } from "../../adapters/kit/hostSpec.js";
import { hostEnvironment } from "./environment.js";

/**
 * Host processes: each in its own process group (so a stop ends whatever it spawned), and
 * identified durably by pid plus the kernel's start time, so a later runtime never mistakes
 * a reused pid for its orphan. execa starts them; stopping is ours (`stopProcessGroup`):
 * execa's own kill and timeout signal the leader alone, and a host's agent CLI and the
 * agent's tools are in its group.
 */

/** Start time of a live process from /proc (Linux); null elsewhere or when it is gone. */
export async function processStartTime(pid: number): Promise<string | null> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    // Field 22 (starttime); the command name (field 2) may hold spaces, so count after its ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

/** How long an exited host's output may take to drain before its exit is reported anyway. */
const DRAIN_GRACE_MS = 500;

type HostExit = { code: number | null; signal: NodeJS.Signals | null };

export async function spawnHost(spec: SpawnSpec): Promise<SpawnedHost> {
  const subprocess = execa(spec.command, spec.args, {
    cwd: spec.cwd,
    env: hostEnvironment(spec.env, spec.inherit),
    extendEnv: false, // the allowlisted environment is the whole environment
    detached: true, // its own process group; execa's exit cleanup does not apply to a detached child
    stdio: ["pipe", "pipe", "pipe"],
    buffer: false, // frames stream to the channel, never collected
    reject: false, // an exit is reported to the supervisor, not thrown
  });
  holdUntilRead(subprocess.stdout);
  holdUntilRead(subprocess.stderr);
  // Listen before anything can be awaited: a host may exit at once. execa settles once the
  // host exited and its output was drained (the last frames matter in a failure report);
  // `exit` bounds the wait, since a grandchild may hold the pipes open.
  const exited = new Promise<HostExit>((resolve) => {
    subprocess.once("exit", (code, signal) => setTimeout(() => resolve({ code, signal }), DRAIN_GRACE_MS).unref());
    subprocess.then(
      (result) => resolve({ code: result.exitCode ?? null, signal: (result.signal ?? null) as NodeJS.Signals | null }),
      () => undefined, // (reject: false) an internal failure of execa leaves the exit to `exit`
    );
  });
  // `spawn` comes first when the process exists; otherwise execa settles with the failure
  // (an error event, or a spawn that threw at once and never emits anything).
  const started = new Promise<null>((resolve) => subprocess.once("spawn", () => resolve(null)));
  const failed = await Promise.race([started, subprocess]);
  if (failed !== null || subprocess.pid === undefined) {
    const reason = failed?.originalMessage ?? failed?.message ?? "no process was created";
    throw new HostUnavailableError(`could not start the host ${spec.command}: ${reason}`, {
      reason: "spawn_failed",
      command: spec.command,
      ...(failed?.code ? { errno: failed.code } : {}),
    });
  }
  const pid = subprocess.pid;
  return {
    child: subprocess,
    pid,
    exited,
    startTime: await processStartTime(pid),
    commandLine: [spec.command, ...spec.args].join(" "),
    endpoint: spec.endpoint ?? null,
  };
}

/**
 * With `buffer: false`, execa lets an output stream flow one tick after the spawn if nobody
 * reads it, and what it reads is gone. The channel attaches later (after the spawn is
 * confirmed and the start time read), and a host's first frame (its `host.ready`) may already
 * be there: so the stream is paused until its first `data` listener, which lets it flow again,
 * as a stream of node:child_process would be.
 */
function holdUntilRead(stream: Readable): void {
  stream.pause();
  const onListener = (event: string | symbol) => {
    if (event !== "data") return;
    stream.removeListener("newListener", onListener);
    stream.resume();
  };
  stream.on("newListener", onListener);
}

/** Running (a zombie waiting for a reaper that is not us counts as gone). */
export const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return true; // no /proc: trust the signal probe
  }
};

/** Signals the whole process group (falling back to the process alone). */
function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  }
}

/** SIGKILL to whatever is left of a process group (its leader already exited). */
export function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    // nobody left
  }
}

/** Live (non-zombie) members of a process group, from /proc; just the leader where /proc is missing. */
export function groupRunning(pgid: number): boolean {
  let entries: string[];
  try {
    entries = readdirSync("/proc").filter((e) => /^\d+$/.test(e));
  } catch {
    return isRunning(pgid);
  }
  return entries.some((entry) => {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return Number(pgrp) === pgid && state !== "Z";
    } catch {
      return false;
    }
  });
}

/** SIGTERM to the group, then SIGKILL after `graceMs` if any member still runs; resolves once they are gone. */
export async function stopProcessGroup(pid: number, graceMs: number): Promise<void> {
  signal(pid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (groupRunning(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  if (groupRunning(pid)) signal(pid, "SIGKILL");
  const hardDeadline = Date.now() + 5_000;
  while (groupRunning(pid) && Date.now() < hardDeadline) await new Promise((r) => setTimeout(r, 10));
}

/** Is the process with this pid the very one recorded (same kernel start time)? */
export async function isSameProcess(pid: number, startTime: string | null): Promise<boolean> {
  if (startTime === null || !isRunning(pid)) return false;
  return (await processStartTime(pid)) === startTime;
}

/** How often the exit of a process that is not our child is looked for (no exit event comes for it). */
const EXIT_POLL_MS = 100;

/**
 * Resolves once the recorded process is gone. For an adopted host: another runtime's child,
 * whose exit no event reports to us, so its pid and start time are looked at until it is gone.
 */
export function processGone(pid: number, startTime: string | null): Promise<void> {
  return new Promise<void>((resolve) => {
    const look = async () => {
      if (!(await isSameProcess(pid, startTime))) return resolve();
      setTimeout(() => void look(), EXIT_POLL_MS); // kept referenced: close() waits on it
    };
    void look();
  });
}
