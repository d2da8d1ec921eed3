import type { Readable } from "node:stream";
import { HostUnavailableError } from "../../domain/errors.js";
import { checkLineLimit, HOST_LINE_LIMITS, readLines, type LineReader } from "./lines.js";
import type { FrameRing } from "./ring.js";

/**
 * How much a host may send at once. A host over a cap is broken: its channel fails (its
 * sessions are lost, their runs fail) and the rest of that stream is read into the void, so
 * no host can make the embedding process build an unbounded string.
 */
export interface ChannelLimits {
  /** Longest frame (a stdout line, a WebSocket message); default 16 MiB. */
  maxFrameBytes?: number;
  /** Longest diagnostic line (stderr); default 1 MiB. */
  maxStderrLineBytes?: number;
}

export function resolveLimits(limits: ChannelLimits = {}): { frameBytes: number; stderrLineBytes: number } {
  return {
    frameBytes: checkLineLimit("maxFrameBytes", limits.maxFrameBytes ?? HOST_LINE_LIMITS.frameBytes),
    stderrLineBytes: checkLineLimit(
      "maxStderrLineBytes",
      limits.maxStderrLineBytes ?? HOST_LINE_LIMITS.stderrLineBytes,
    ),
  };
}

const mib = (bytes: number): string =>
  bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`;

/** Why a host is cut off when it sends more than a cap allows (typed `host_unavailable`, reason `frame_too_large`). */
export function frameTooLarge(stream: "stdout" | "stderr" | "websocket", limitBytes: number): HostUnavailableError {
  const what = stream === "websocket" ? "a WebSocket message" : `a ${stream} line`;
  return new HostUnavailableError(
    `the host sent ${what} over ${mib(limitBytes)} (its size limit) and is cut off as broken`,
    { reason: "frame_too_large", stream, limitBytes },
  );
}

/**
 * A host's diagnostic output (stderr; a WebSocket host's stdout) into the ring, line by line,
 * bounded: an over-long line is sampled and `onTooLong` hears why the host is broken.
 */
export function readDiagnostics(
  stream: Readable,
  ring: FrameRing,
  kind: "stdout" | "stderr",
  maxLineBytes: number,
  onTooLong: (error: HostUnavailableError) => void,
): LineReader {
  return readLines(stream, {
    maxLineBytes,
    onLine: (line) => ring.push(kind === "stderr" ? "stderr" : "in", line),
    onOverflow: (overflow) => {
      ring.note(
        "frame_too_large",
        `${kind}: no newline within ${overflow.limitBytes} bytes; it began: ${overflow.head}`,
      );
      onTooLong(frameTooLarge(kind, overflow.limitBytes));
    },
  });
}
