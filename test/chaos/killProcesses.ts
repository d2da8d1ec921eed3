import { readdirSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { DomainEventSchema } from "../../src/domain/events.js";

/**
 * The SIGKILL loop's own eyes (kills.test.ts): processes read from /proc, the event log read
 * from its file, and what was open at the kill folded from the log's records. Written from the
 * documented formats, not with the runtime's helpers, so the runtime is not its own judge.
 */

/** A process named by pid and kernel start time (a reused pid has another start time). */
export interface HostProcess {
  pid: number;
  startTime: string;
}

/** The fields of /proc/<pid>/stat after the command name: state is [0], ppid [1], starttime [19]. */
function stat(pid: number): string[] | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    return text.slice(text.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
  } catch {
    return "";
  }
}

const HOST_SCRIPT = /adapters[\\/]scripted[\\/]host[\\/]main\.[jt]s/;

/**
 * Stops the child (SIGSTOP: it can start nothing more), waits until the kernel says it is
 * stopped, notes its scripted host children, and SIGKILLs it. A host it was starting at that
 * very moment is among them, recorded by the runtime or not.
 */
export async function freezeAndKill(pid: number): Promise<HostProcess[]> {
  process.kill(pid, "SIGSTOP");
  for (;;) {
    const state = stat(pid)?.[0];
    if (state === undefined || state === "T" || state === "t" || state === "Z") break;
    await new Promise((resolve) => setImmediate(resolve));
  }
  const hosts: HostProcess[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = stat(Number(entry));
    if (!fields || Number(fields[1]) !== pid || fields[0] === "Z") continue;
    if (HOST_SCRIPT.test(commandLine(Number(entry)))) hosts.push({ pid: Number(entry), startTime: fields[19]! });
  }
  process.kill(pid, "SIGKILL");
  return hosts;
}

/** That very process still runs (a zombie, waiting for a reaper, has ended). */
export function stillRunning(host: HostProcess): boolean {
  const fields = stat(host.pid);
  return fields !== null && fields[0] !== "Z" && fields[19] === host.startTime;
}

/** SIGKILL to a process group (hosts lead their own), else to the process alone. */
export function killGroup(pid: number): void {
  for (const target of [-pid, pid]) {
    try {
      return void process.kill(target, "SIGKILL");
    } catch {
      // no such group: try the process
    }
  }
}

export interface LogLine {
  seq: number;
  at: string;
  event: { type: string } & Record<string, unknown>;
}

/**
 * The event log as its file holds it (README "Durability": one JSON record per line, seq
 * gap-free from 1). A torn last line (no newline) is what a kill may leave; it is a problem
 * only where none may be.
 */
export async function readLog(
  dataDir: string,
  options: { tornTailAllowed: boolean },
): Promise<{ records: LogLine[]; head: number; problems: string[] }> {
  const text = await readFile(join(dataDir, "events.jsonl"), "utf8");
  const lines = text.split("\n");
  const tail = lines.pop()!;
  const problems: string[] = [];
  if (tail !== "" && !options.tornTailAllowed) problems.push(`a torn last line of ${tail.length} characters`);
  const records: LogLine[] = [];
  lines.forEach((line, i) => {
    let record: LogLine;
    try {
      record = JSON.parse(line) as LogLine;
    } catch {
      return void problems.push(`line ${i + 1} is not JSON`);
    }
    if (record.seq !== i + 1) problems.push(`line ${i + 1} has seq ${record.seq}`);
    const parsed = DomainEventSchema.safeParse(record.event);
    if (!parsed.success) problems.push(`seq ${record.seq}: not a domain event: ${parsed.error.issues[0]?.message}`);
    records.push(record);
  });
  return { records, head: records.at(-1)?.seq ?? 0, problems };
}

const TERMINAL = new Set(["completed", "interrupted", "failed", "cancelled", "rolled_back"]);

/** Runs (status at the kill) and requests still pending at the kill, folded from the log. */
export function stateAtKill(records: readonly LogLine[]): {
  runs: Map<string, { threadId: string; status: string; terminal: boolean }>;
  pendingRequests: Map<string, { threadId: string; runId: string; kind: string }>;
} {
  const runs = new Map<string, { threadId: string; status: string; terminal: boolean }>();
  const pendingRequests = new Map<string, { threadId: string; runId: string; kind: string }>();
  for (const { event } of records) {
    const runId = event.runId as string;
    const threadId = event.threadId as string;
    switch (event.type) {
      case "run.created":
        runs.set(runId, { threadId, status: "queued", terminal: false });
        break;
      case "run.state":
      case "run.terminal": {
        const status = event.status as string;
        runs.set(runId, { threadId, status, terminal: TERMINAL.has(status) });
        break;
      }
      case "request.opened":
        pendingRequests.set(event.requestId as string, {
          threadId,
          runId,
          kind: (event.payload as { kind: string }).kind,
        });
        break;
      case "request.resolved":
      case "request.closed":
        pendingRequests.delete(event.requestId as string);
        break;
    }
  }
  return { runs, pendingRequests };
}
