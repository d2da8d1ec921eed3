import { z } from "zod";
import { TurnTerminalStatusSchema } from "../../domain/entities.js";
import { ProtocolError } from "../../domain/errors.js";
import { AttachResultSchema, ReattachResultSchema, ResumeResultSchema } from "./protocol/host.js";

/**
 * The scripted host's replies, checked where the adapter reads them: the host is another process, and what it answers
 * is untrusted like any provider's. A reply of the wrong shape is a ProtocolError naming the call, never a value cast
 * to the contract's type and handed to the runtime, nor a raw ZodError.
 */

const Handle = z.object({ threadRef: z.string().nullable(), resumeCursor: z.string().min(1) });

const Snapshot = z.object({
  threadRef: z.string().nullable(),
  turns: z.array(
    z.object({
      turnRef: z.string().nullable(),
      status: z.union([TurnTerminalStatusSchema, z.literal("running")]),
      userText: z.string(),
      assistantText: z.string(),
    }),
  ),
});

/** What a call's reply resolves to: nothing (null on the wire) for the calls the runtime awaits only. */
const Nothing = z.unknown().transform(() => undefined);

/** Each call's reply as the adapter hands it on (unknown keys dropped: only what the contract says goes through). */
const REPLIES = {
  ensureProviderThread: Handle,
  sendRun: z.object({ turnRef: z.string().nullable(), thread: Handle.optional() }),
  steerRun: Nothing,
  interrupt: Nothing,
  isTurnAlive: z.boolean(),
  respondToRequest: Nothing,
  readThreadSnapshot: Snapshot,
  rollbackThread: z
    .object({ snapshot: Snapshot.optional(), handle: Handle.optional() })
    .nullable()
    .transform((r) => r ?? undefined),
  forkThread: Handle,
  summarize: z.string(),
  resume: ResumeResultSchema,
  attach: AttachResultSchema,
  reattach: ReattachResultSchema,
} as const;

export type CheckedCall = keyof typeof REPLIES;
export type CheckedReply<M extends CheckedCall> = z.output<(typeof REPLIES)[M]>;

/** A reply as the adapter reads it, or a ProtocolError naming the call and what did not match. */
export function checkReply<M extends CheckedCall>(method: M, reply: unknown): CheckedReply<M> {
  const parsed = (REPLIES[method] as z.ZodType).safeParse(reply);
  if (parsed.success) return parsed.data as CheckedReply<M>;
  const issues = parsed.error.issues.slice(0, 3).map((i) => `${i.path.join(".") || "(result)"}: ${i.message}`);
  throw new ProtocolError(
    `scripted host: ${method} answered a reply that does not match its schema: ${issues.join("; ")}`,
    { method },
  );
}
