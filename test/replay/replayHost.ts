import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";

/**
 * Impersonates a provider process from a recorded transcript (JSONL `{"d":"in"|"out","f":<frame>}`,
 * "out" = what the client sent), for the replay tests. The wire dialect says how client frames
 * match recorded ones and how recorded answers are readdressed to the ids the client used.
 *
 * Environment: <PREFIX>_FIXTURE (the transcript, required); <PREFIX>_ROOT (a real directory that
 * replaces `<root>` in the recorded frames; also where the progress report
 * `<name>.report.json` is written).
 *
 * A pointer walks the recording. Nothing is emitted before the client's first frame. Each
 * client frame must match the next recorded "out" frame; a mismatch is reported on stderr
 * (both frames) and in the report, and the host exits 1. After a match, every recorded "in"
 * frame up to the next "out" frame is written to stdout, readdressed. The host stays until
 * stdin ends.
 */

export type Frame = Record<string, unknown>;

export interface ReplayDialect {
  /** Why the client frame does not match the recorded one, or null when it does. */
  mismatch(got: Frame, want: Frame): string | null;
  /** The id of a client request (recorded or actual), remembered to readdress its answer. */
  requestId(frame: Frame): string | undefined;
  /** The request id a recorded answer carries, and the frame with it replaced. */
  answerTo(frame: Frame): { id: string; readdress(actual: string): Frame } | undefined;
  /**
   * A client frame that is no part of the recording (a liveness probe a timer sends): the host's own answer to it
   * (null: none), written at once, and the frame is not matched. Undefined: the frame is matched as usual.
   */
  aside?(frame: Frame): Frame | null | undefined;
}

export function runReplayHost(name: string, prefix: string, dialect: ReplayDialect): void {
  const fixture = process.env[`${prefix}_FIXTURE`];
  if (!fixture) {
    process.stderr.write(`${name}: ${prefix}_FIXTURE is not set\n`);
    process.exit(1);
  }
  const root = process.env[`${prefix}_ROOT`];
  const reportPath = root ? join(root, `${name}.report.json`) : null;

  let text = readFileSync(fixture, "utf8");
  // The path goes into JSON strings: escape it as JSON would.
  if (root) text = text.replaceAll("<root>", JSON.stringify(root).slice(1, -1));
  const recording = text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line, i) => {
      try {
        return JSON.parse(line) as { d: "in" | "out"; f: Frame };
      } catch {
        process.stderr.write(`${name}: ${fixture}:${i + 1} is not JSON\n`);
        process.exit(1);
      }
    });
  const expected = recording.filter((r) => r.d === "out").length;
  let pointer = 0;
  let matched = 0;
  /** Recorded client request id -> the id the client actually used. */
  const ids = new Map<string, string>();

  const report = (extra: Record<string, unknown> = {}) => {
    if (reportPath) writeFileSync(reportPath, JSON.stringify({ fixture, expected, matched, ...extra }, null, 2));
  };
  function fail(reason: string, got: unknown, want: unknown): never {
    const message =
      `${name}: ${reason}\n` +
      `  fixture: ${fixture} (client frame ${matched + 1} of ${expected})\n` +
      `  client sent: ${JSON.stringify(got)}\n` +
      `  recorded:    ${JSON.stringify(want)}\n`;
    process.stderr.write(message);
    report({ error: message });
    process.exit(1);
  }
  const emitUntilNextOut = () => {
    while (pointer < recording.length && recording[pointer]!.d === "in") {
      let frame = recording[pointer]!.f;
      const answer = dialect.answerTo(frame);
      const actual = answer && ids.get(answer.id);
      if (answer && actual !== undefined) frame = answer.readdress(actual);
      process.stdout.write(`${JSON.stringify(frame)}\n`);
      pointer++;
    }
  };
  const onClientFrame = (line: string) => {
    if (line.trim() === "") return;
    let got: Frame;
    try {
      got = JSON.parse(line) as Frame;
    } catch {
      fail("the client sent a line that is not JSON", line, recording[pointer]?.f ?? "(end of recording)");
    }
    const own = dialect.aside?.(got);
    if (own !== undefined) {
      if (own !== null) process.stdout.write(`${JSON.stringify(own)}\n`);
      return;
    }
    // Frames the server sent before the client spoke go out first.
    if (matched === 0) emitUntilNextOut();
    const next = recording[pointer];
    if (!next) fail("the client sent a frame past the end of the recording", got, "(end of recording)");
    const why = dialect.mismatch(got, next.f);
    if (why) fail(why, got, next.f);
    const recordedId = dialect.requestId(next.f);
    const actualId = dialect.requestId(got);
    if (recordedId !== undefined && actualId !== undefined) ids.set(recordedId, actualId);
    pointer++;
    matched++;
    report();
    emitUntilNextOut();
  };

  report();
  createInterface({ input: process.stdin })
    .on("line", onClientFrame)
    .on("close", () => process.exit(0));
}
