import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { crashWithApprovalPending } from "../model/models/threadPolicies.js";
import { tempDir } from "../support/files.js";
import { scripted } from "../support/policies.js";
import { openTestRuntime, sendAndWait } from "../support/runtime.js";

/** Reopening a data directory whose runtime was SIGKILLed, with a configuration that changed since. */

/**
 * The model suite's crash child (target `main`, data in `<dir>/data`), SIGKILLed with a run awaiting approval: its
 * thread id.
 */
const crashOnTargetMain = (dir: string) => crashWithApprovalPending(dir, {});

describe("reopening after a crash", () => {
  it(
    "a crashed run whose target is no longer configured " + "is cancelled as provider_target_missing (review)",
    async () => {
      const { dir, cleanup: removeDir } = await tempDir("tiller-review-missing-");
      try {
        const crashedThreadId = await crashOnTargetMain(dir);
        const { rt, cleanup } = await openTestRuntime({ b: scripted() }, { dataDir: join(dir, "data") });
        try {
          const runs = [...rt.views.runs.values()];
          expect(runs.map((r) => [r.threadId, r.providerTarget, r.status, r.reason])).toEqual([
            [crashedThreadId, "main", "cancelled", "provider_target_missing"],
          ]);
          const snapshot = await rt.readThread(crashedThreadId);
          expect(snapshot.runs.map((r) => r.status)).toEqual(["cancelled"]);
          expect(snapshot.pendingRequests).toEqual([]);
          // The runtime works: a new thread on the configured target runs.
          const { threadId } = await rt.createThread({ providerTarget: "b" });
          expect((await sendAndWait(rt, threadId, "hello")).status).toBe("completed");
        } finally {
          await cleanup();
        }
      } finally {
        await removeDir();
      }
    },
    60_000,
  );
});
