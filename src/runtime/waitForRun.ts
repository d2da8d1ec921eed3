import { z } from "zod";
import { TimeoutError } from "../domain/errors.js";
import type { Dispatcher } from "./dispatch.js";

export const WaitForRunOptionsSchema = z.strictObject({
  timeoutMs: z.number().int().positive().max(2_147_483_647).optional(),
  signal: z.custom<AbortSignal>((v) => v instanceof AbortSignal, "expected an AbortSignal").optional(),
});

/**
 * Resolves once the run's terminal is committed. `timeoutMs` rejects with `timeout` and
 * `signal` with its reason (the run itself goes on); the timer and the listener never outlive
 * the wait.
 */
export async function runEndedWithin(
  d: Pick<Dispatcher, "runEnded">,
  runId: string,
  { timeoutMs, signal }: z.output<typeof WaitForRunOptionsSchema>,
): Promise<void> {
  const stop = new AbortController();
  const onAbort = () => stop.abort(signal!.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  if (signal?.aborted) onAbort();
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(
          () => stop.abort(new TimeoutError(`run ${runId} did not end within ${timeoutMs} ms`, { runId, timeoutMs })),
          timeoutMs,
        );
  try {
    await d.runEnded(runId, stop.signal);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}
