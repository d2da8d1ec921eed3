import { createRuntime, type RuntimeOptions, type TillerRuntime } from "../../src/index.js";
import { Runtime } from "../../src/runtime/runtime.js";

/**
 * Tests only: the runtime behind the public `TillerRuntime`, with its internals (read models,
 * actors, host processes). Embedders get the interface; a test that checks what the actors
 * or the read models hold reaches them here.
 */
export function internals(rt: TillerRuntime): Runtime {
  if (!(rt instanceof Runtime)) throw new Error("not a runtime made by createRuntime");
  return rt;
}

/** `createRuntime` for tests that look inside: the same runtime, typed with its internals. */
export async function openRuntime(options: RuntimeOptions): Promise<Runtime> {
  return internals(await createRuntime(options));
}
