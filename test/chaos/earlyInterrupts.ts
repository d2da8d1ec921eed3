import type { Runtime } from "../../src/runtime/runtime.js";

/**
 * Early interrupts and restarts on a real provider: each sent at once after its send, when the
 * provider may not have taken up the turn yet. A lost interrupt leaves its run hanging on the
 * simulator forever, so each wait is bounded and a timeout counts as lost. Turns hang unless
 * their prompt says `[fast]` (see `hangUnlessFast`). Returns what was lost, in words.
 */
export async function earlyInterrupts(
  rt: Runtime,
  threadId: string,
  rounds: number,
  lostAfterMs = 20_000,
): Promise<string[]> {
  const lost: string[] = [];
  const ended = (runId: string) => rt.waitForRun(runId, { timeoutMs: lostAfterMs }).catch(() => null);
  // A round that lost its interrupt leaves its run running, and every later round would queue
  // behind it: the first loss ends the rounds (the rest would only repeat it).
  for (let i = 0; i < rounds && lost.length === 0; i++) {
    const { runId } = await rt.sendMessage({ threadId, text: `task ${i}` });
    const { via } = await rt.interrupt({ runId });
    const run = await ended(runId);
    if (via !== "native" || run?.status !== "interrupted")
      lost.push(`interrupt ${i} (via ${via}): ${run?.status ?? "still running"}`);
  }
  for (let i = 0; i < rounds && lost.length === 0; i++) {
    const old = await rt.sendMessage({ threadId, text: `long ${i}` });
    const next = await rt.sendMessage({ threadId, text: `[fast] instead ${i}`, mode: "restart" });
    const [a, b] = await Promise.all([ended(old.runId), ended(next.runId)]);
    if (next.disposition !== "restarting" || a?.status !== "interrupted")
      lost.push(`restart ${i} (old run): ${a?.status ?? "still running"}`);
    if (b?.status !== "completed") lost.push(`restart ${i} (new run): ${b?.status ?? "never ran"}`);
  }
  return lost;
}

/**
 * A simulator reply for every turn: a hang (until interrupted), or a quick answer when the last user message says
 * [fast].
 */
export const hangUnlessFast = (lastUserText: (body: unknown) => string) => (req: { body: unknown }) =>
  lastUserText(req.body).includes("[fast]") ? { text: "done" } : { hang: true as const, text: "working on it" };
