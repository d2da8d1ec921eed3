import { emit, type Thread } from "./thread.js";

/**
 * Interrupts. Claude ignores an interrupt that comes before it took up the prompt (the prompt stays queued and its
 * turn then runs on): such an interrupt is held until the turn's first message, or sent anyway once the hold has
 * lasted INTERRUPT_GRACE_MS.
 */

/**
 * How long an interrupt waits for Claude to take up its prompt, and how long after it a turn that has not stopped still
 * counts as alive.
 */
export const INTERRUPT_GRACE_MS = 30_000;

/** Claude took up the prompt in flight: an interrupt held for it goes out now. */
export async function tookUpPrompt(thread: Thread): Promise<void> {
  thread.running = true;
  if (thread.heldInterrupt) await sendHeldInterrupt(thread);
}

/** Holds an interrupt until Claude takes up the prompt, or INTERRUPT_GRACE_MS at the most. */
export function holdInterrupt(thread: Thread): void {
  // One timer per held interrupt: a timer of an earlier turn's interrupt must never send this one early.
  dropHeldInterrupt(thread);
  thread.heldInterrupt = setTimeout(() => void sendHeldInterrupt(thread), INTERRUPT_GRACE_MS).unref();
}

export function dropHeldInterrupt(thread: Thread): void {
  if (thread.heldInterrupt) clearTimeout(thread.heldInterrupt);
  thread.heldInterrupt = null;
}

async function sendHeldInterrupt(thread: Thread): Promise<void> {
  dropHeldInterrupt(thread);
  await interruptNow(thread).catch((error: unknown) =>
    emit(thread, { type: "warning", threadRef: thread.cursor, message: `interrupt failed: ${String(error)}` }),
  );
}

/**
 * Interrupts Claude. A prompt it has not taken up yet survives a plain interrupt (its receipt lists
 * the prompt's uuid under `still_queued`, and the prompt then runs): the interrupt is held again,
 * for the turn's first message. A message that only looked like that turn's start is thus never
 * the end of the interrupt.
 */
export async function interruptNow(thread: Thread): Promise<void> {
  const receipt = await thread.query.interrupt();
  const uuid = thread.prompt?.uuid;
  if (uuid !== undefined && receipt?.still_queued?.includes(uuid)) {
    thread.running = false;
    holdInterrupt(thread);
  }
}

/** Asks the thread's turn in flight to stop (a turn not yet taken up: once it is). */
export async function interrupt(thread: Thread): Promise<void> {
  // Only a turn in flight is interrupted: a stale flag would call the next failure an interrupt.
  if (thread.prompt === null) return;
  thread.mapper.interrupting = true;
  thread.interruptedAt ??= Date.now();
  if (!thread.running) holdInterrupt(thread);
  else await interruptNow(thread);
}

/**
 * Alive while Claude's process runs and the prompt in flight has no result yet, unless it was asked to stop long ago
 * and still has not: then Claude cannot vouch for it.
 */
export function turnAlive(thread: Thread | undefined): boolean {
  const stuck = thread?.interruptedAt != null && Date.now() - thread.interruptedAt > INTERRUPT_GRACE_MS;
  return thread !== undefined && thread.prompt !== null && !stuck;
}
