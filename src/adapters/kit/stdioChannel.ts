import type { ChildProcess } from "node:child_process";
import { readDiagnostics, resolveLimits, type ChannelLimits } from "./frameLimits.js";
import { readLines } from "./lines.js";
import type { FrameRing } from "./ring.js";
import { RpcChannel } from "./rpcChannel.js";

/**
 * Newline-delimited JSON-RPC over a child's stdin/stdout; stderr lines go to the ring. Both
 * are split under a cap (`limits`): a host over it is cut off as broken.
 */
export class StdioChannel extends RpcChannel {
  constructor(
    private readonly child: ChildProcess,
    ring: FrameRing,
    limits: ChannelLimits = {},
  ) {
    super(ring);
    const { frameBytes, stderrLineBytes } = resolveLimits(limits);
    readLines(child.stdout!, {
      maxLineBytes: frameBytes,
      onLine: (line) => this.receive(line),
      onOverflow: (overflow) => this.overflowed("stdout", overflow),
    });
    readDiagnostics(child.stderr!, ring, "stderr", stderrLineBytes, (error) => this.fail(error));
    child.stdin!.on("error", () => undefined); // a dead host: calls fail through the exit path
  }

  protected write(line: string): void {
    this.child.stdin!.write(`${line}\n`);
  }
}
