import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";

/**
 * A long-lived child process spoken to in lines: the test writes a command, the child answers
 * one line per command. Lets two children start each round together without any sleep: both
 * are already waiting on stdin when the test writes `go` to each.
 */
export class LineChild {
  readonly proc: ChildProcess;
  private readonly answers: string[] = [];
  private readonly waiting: Array<{ resolve: (line: string) => void; reject: (error: Error) => void }> = [];
  private gone: Error | undefined;

  /** `wrap`: a command the child is started under (its last argument is followed by node's command line). */
  constructor(script: string, args: string[], wrap: string[] = []) {
    const node = [process.execPath, "--import", "tsx", script, ...args];
    const [command, ...rest] = [...wrap, ...node];
    this.proc = spawn(command!, rest, { stdio: ["pipe", "pipe", "inherit"] });
    createInterface({ input: this.proc.stdout! }).on("line", (line) => {
      const waiter = this.waiting.shift();
      if (waiter) waiter.resolve(line);
      else this.answers.push(line);
    });
    this.proc.once("exit", (code, signal) => {
      this.gone = new Error(`child ${this.proc.pid} exited (${signal ?? code})`);
      for (const waiter of this.waiting.splice(0)) waiter.reject(this.gone);
    });
  }

  send(command: string): void {
    this.proc.stdin!.write(command + "\n");
  }

  next(): Promise<string> {
    const line = this.answers.shift();
    if (line !== undefined) return Promise.resolve(line);
    if (this.gone) return Promise.reject(this.gone);
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  async ask(command: string): Promise<string> {
    this.send(command);
    return this.next();
  }

  /** Ends the child: stdin closes (it leaves its loop), then SIGKILL by pid if it still runs. */
  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise((resolve) => this.proc.once("exit", resolve));
    this.proc.stdin!.end();
    this.proc.kill("SIGKILL");
    await exited;
  }
}
