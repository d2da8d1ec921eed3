import { defineConfig } from "vitest/config";
import base from "./vitest.config.js";

/**
 * The suites `npm run test:mutation` runs against each mutant: the ones that exercise the decision code
 * in-process (machines, capabilities, the model, the runtime over scripted providers, the policies).
 * The real-binary, replay, chaos and fault suites are left out: they spawn processes and take minutes,
 * which multiplied by every mutant would make a run take hours. (Spread, not mergeConfig: that would
 * append to the base `include` rather than replace it.)
 */
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: [
      "test/machines/**/*.test.ts",
      "test/capabilities/**/*.test.ts",
      "test/model/**/*.test.ts",
      "test/runtime/**/*.test.ts",
      "test/policies/**/*.test.ts",
    ],
  },
});
