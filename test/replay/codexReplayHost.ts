import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";

/**
 * Impersonates `codex app-server` from a recorded transcript (test/replay/fixtures/codex/*.jsonl,
 * written by record-codex.ts), for the replay tests: started through the `codex-replay` script
 * as the Codex adapter's `binary` (the `app-server` argument is ignored).
 *
 * Environment: CODEX_REPLAY_FIXTURE (the transcript, required); CODEX_REPLAY_ROOT (a real
 * directory that replaces `<root>` in the recorded frames; also where the progress report
 * `codex-replay.report.json` is written).
 *
 * A pointer walks the recording. Nothing is emitted before the client's first frame. Each
 * client frame must match the next recorded "out" frame (the same method for a request or a
 * notification; a response to the same server request, with the same result, for an answer);
 * a mismatch is reported on stderr (both frames) and in the report, and the host exits 1.
 * After a match, every recorded "in" frame up to the next "out" frame is written to stdout,
 * responses carrying the id the client actually used. The host stays until stdin ends.
 */

type Frame = Record<string, unknown> & { id?: number | string | null; method?: string };
interface Recorded {
  d: "in" | "out";
  f: Frame;
}

const fixture = process.env.CODEX_REPLAY_FIXTURE;
if (!fixture) {
  process.stderr.write("codex-replay: CODEX_REPLAY_FIXTURE is not set\n");
  process.exit(1);
}
const root = process.env.CODEX_REPLAY_ROOT;
const reportPath = root ? join(root, "codex-replay.report.json") : null;

let text = readFileSync(fixture, "utf8");
// The path goes into JSON strings: escape it as JSON would.
if (root) text = text.replaceAll("<root>", JSON.stringify(root).slice(1, -1));
const recording: Recorded[] = text
  .split("\n")
  .filter((line) => line.trim() !== "")
  .map((line, i) => {
    try {
      return JSON.parse(line) as Recorded;
    } catch {
      process.stderr.write(`codex-replay: ${fixture}:${i + 1} is not JSON\n`);
      process.exit(1);
    }
  });
const expected = recording.filter((r) => r.d === "out").length;

let pointer = 0;
let matched = 0;
/** Recorded client request id -> the id the client actually used. */
const ids = new Map<string, Frame["id"]>();

const isRequest = (f: Frame) => typeof f.method === "string" && f.id !== undefined && f.id !== null;
const isNotification = (f: Frame) => typeof f.method === "string" && (f.id === undefined || f.id === null);
const isResponse = (f: Frame) => f.method === undefined && f.id !== undefined && ("result" in f || "error" in f);

function report(extra: Record<string, unknown> = {}): void {
  if (!reportPath) return;
  writeFileSync(reportPath, JSON.stringify({ fixture, expected, matched, ...extra }, null, 2));
}

function fail(reason: string, got: unknown, want: unknown): never {
  const message = `codex-replay: ${reason}\n  fixture: ${fixture} (client frame ${matched + 1} of ${expected})\n  client sent: ${JSON.stringify(got)}\n  recorded:    ${JSON.stringify(want)}\n`;
  process.stderr.write(message);
  report({ error: message });
  process.exit(1);
}

/** Why the client frame does not match the recorded one, or null when it does. */
function mismatch(got: Frame, want: Frame): string | null {
  if (isRequest(want)) {
    if (!isRequest(got)) return "expected a request";
    return got.method === want.method ? null : `expected request ${want.method}`;
  }
  if (isNotification(want)) {
    if (!isNotification(got)) return "expected a notification";
    return got.method === want.method ? null : `expected notification ${want.method}`;
  }
  if (isResponse(want)) {
    if (!isResponse(got)) return "expected a response to a server request";
    if (got.id !== want.id) return `expected the response to server request ${String(want.id)}`;
    if ("error" in want !== "error" in got) return "expected " + ("error" in want ? "an error" : "a result");
    if (JSON.stringify(got.result ?? got.error) !== JSON.stringify(want.result ?? want.error)) return "the answer differs";
    return null;
  }
  return "unrecognised recorded frame";
}

function emitUntilNextOut(): void {
  while (pointer < recording.length && recording[pointer]!.d === "in") {
    const frame = { ...recording[pointer]!.f };
    if (isResponse(frame)) {
      const actual = ids.get(JSON.stringify(frame.id));
      if (actual !== undefined) frame.id = actual;
    }
    process.stdout.write(`${JSON.stringify(frame)}\n`);
    pointer++;
  }
}

function onClientFrame(line: string): void {
  if (line.trim() === "") return;
  let got: Frame;
  try {
    got = JSON.parse(line) as Frame;
  } catch {
    fail("the client sent a line that is not JSON", line, recording[pointer]?.f ?? "(end of recording)");
  }
  // Frames the server sent before the client spoke (none in practice) go out first.
  if (matched === 0) emitUntilNextOut();
  const next = recording[pointer];
  if (!next) fail("the client sent a frame past the end of the recording", got, "(end of recording)");
  const why = mismatch(got, next.f);
  if (why) fail(why, got, next.f);
  if (isRequest(next.f)) ids.set(JSON.stringify(next.f.id), got.id);
  pointer++;
  matched++;
  report();
  emitUntilNextOut();
}

report();
const stdin = createInterface({ input: process.stdin });
stdin.on("line", onClientFrame);
stdin.on("close", () => process.exit(0));
