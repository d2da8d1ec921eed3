import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Generous: the suite must pass on a loaded 2-core machine. No test asserts on time.
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
