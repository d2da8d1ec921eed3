import type { CapabilityOverrides, ScriptStep } from "../../src/index.js";
import type { ScriptedBackend } from "../../src/adapters/scripted/host/backend.js";
import { scripted } from "./policies.js";
import { deferred, override } from "./runtime.js";

/**
 * What the rollback tests share: three turns that each change a file the rollback must restore (`[one]` and `[two]`
 * write f.txt, `[three]` adds g.txt), and a provider whose rollback can be held in flight.
 */
export const fileTurns: Record<string, ScriptStep[]> = {
  "[one]": [
    { type: "file_change", path: "f.txt", diff: "+one", content: "one\n" },
    { type: "text", text: "1" },
  ],
  "[two]": [
    { type: "file_change", path: "f.txt", diff: "+two", content: "two\n" },
    { type: "text", text: "2" },
  ],
  "[three]": [
    { type: "file_change", path: "g.txt", diff: "+three", content: "three\n" },
    { type: "text", text: "3" },
  ],
};

/** A scripted adapter whose `rollbackThread` waits, once called, until released. */
export function heldRollback(backend: ScriptedBackend, caps: CapabilityOverrides = {}) {
  const adapter = scripted(caps, undefined, backend);
  const called = deferred();
  const gate = deferred();
  const wrapped = override(adapter, {
    rollbackThread: async (input) => {
      called.resolve();
      await gate.promise;
      return adapter.rollbackThread!(input);
    },
  });
  return { adapter: wrapped, called: called.promise, release: gate.resolve };
}
