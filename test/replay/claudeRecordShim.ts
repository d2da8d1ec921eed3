import { spawn } from "node:child_process";
import { openSync, writeSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";

/**
 * Stands between the Claude Agent SDK and the real Claude Code binary while a transcript is
 * recorded (record-claude.ts): started through `claude-record` as the adapter's `executable`,
 * it runs the binary the SDK ships with the same arguments and writes every stream-json line
 * both ways to CLAUDE_RECORD_TO as `{"d":"out"|"in","f":<frame>}` (out: SDK -> binary).
 * One process per transcript: a second one would need a transcript of its own, so it fails.
 */

const target = process.env.CLAUDE_RECORD_TO;
if (!target) {
  process.stderr.write("claude-record: CLAUDE_RECORD_TO is not set\n");
  process.exit(1);
}
const fd = openSync(target, "wx");
const write = (d: "in" | "out", line: string) => {
  if (line.trim() === "") return;
  try {
    writeSync(fd, `${JSON.stringify({ d, f: JSON.parse(line) as unknown })}\n`);
  } catch {
    process.stderr.write(`claude-record: skipped a non-JSON ${d} line\n`);
  }
};

const require = createRequire(import.meta.url);
const sdkDir = dirname(require.resolve("@anthropic-ai/claude-agent-sdk"));
const binary = join(dirname(sdkDir), `claude-agent-sdk-${process.platform}-${process.arch}`, "claude");
const child = spawn(binary, process.argv.slice(2), { stdio: ["pipe", "pipe", "inherit"] });
createInterface({ input: process.stdin })
  .on("line", (line) => {
    write("out", line);
    child.stdin.write(`${line}\n`);
  })
  .on("close", () => child.stdin.end());
createInterface({ input: child.stdout }).on("line", (line) => {
  write("in", line);
  process.stdout.write(`${line}\n`);
});
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
process.on("SIGTERM", () => child.kill("SIGTERM"));
