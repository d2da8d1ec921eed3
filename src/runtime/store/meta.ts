import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { z } from "zod";
import { openStateDocument, type StateDocument } from "./documents.js";

/** The data directory's own small state document (lowdb; rewritten whole, so kept tiny). */
export const RuntimeMetaSchema = z.strictObject({
  schemaVersion: z.literal(1),
  createdAt: z.string(),
  lastOpenedAt: z.string(),
  openCount: z.number().int().nonnegative(),
  /** Set on a clean close; false at open means the previous life ended in a crash. */
  closedCleanly: z.boolean(),
  /**
   * The directory's identity: random, made with the directory (or by the first version that has it). A projection
   * snapshot names it, so one copied in from another directory is never taken for this one's.
   */
  directoryId: z
    .string()
    .regex(/^[0-9a-f]{32}$/)
    .optional(),
});
export type RuntimeMeta = z.infer<typeof RuntimeMetaSchema>;

const newDirectoryId = () => randomBytes(16).toString("hex");

export async function openRuntimeMeta(
  dataDir: string,
  now: Date,
): Promise<{ doc: StateDocument<RuntimeMeta>; crashed: boolean }> {
  const doc = await openStateDocument(join(dataDir, "runtime.json"), RuntimeMetaSchema, () => ({
    schemaVersion: 1 as const,
    createdAt: now.toISOString(),
    lastOpenedAt: now.toISOString(),
    openCount: 0,
    closedCleanly: true,
    directoryId: newDirectoryId(),
  }));
  const crashed = doc.data.openCount > 0 && !doc.data.closedCleanly;
  await doc.update((d) => {
    d.openCount += 1;
    d.lastOpenedAt = now.toISOString();
    d.closedCleanly = false;
    d.directoryId ??= newDirectoryId();
  });
  return { doc, crashed };
}
