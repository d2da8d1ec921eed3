// @ts-check
/**
 * `npm run test:mutation`: mutation testing of the decision code (issue 14, "The model must not be the code").
 * Not part of `npm test`: a full run takes long. Incremental, so a rerun only tests mutants whose code or
 * covering tests changed (the incremental file lives under reports/, kept out of git).
 * @type {import("@stryker-mutator/api/core").PartialStrykerOptions}
 */
export default {
  testRunner: "vitest",
  vitest: { configFile: "vitest.mutation.config.ts" },
  mutate: [
    "src/capabilities/predicates.ts",
    "src/machines/*.ts",
    // Data and emission helpers, not decisions.
    "!src/machines/policies.ts",
    "!src/machines/emitted.ts",
    "src/runtime/handoff.ts",
    "src/runtime/history.ts",
    "src/runtime/forkSituation.ts",
    "src/runtime/affordances.ts",
    "src/runtime/ingest/lifecycle.ts",
    "src/runtime/ingest/requests.ts",
  ],
  coverageAnalysis: "perTest",
  // Stryker rewrites paths in the tsconfig it copies into its sandbox through TypeScript's JS API, which
  // TypeScript 7 (the native compiler) no longer has. Ours has no `extends` or `references` to rewrite, so
  // point Stryker at a file that does not exist and it leaves the sandbox's tsconfig as it is.
  tsconfigFile: "tsconfig.stryker-skip.json",
  // The host is shared (two cores): one test process at a time.
  concurrency: 1,
  // Most mutants of a machine are static (its config is built when the module loads), and each static mutant
  // runs every suite: a full run takes hours. `npm run test:mutation -- --ignoreStatic` skips them for a quick
  // look at the guards and actions; the score the issue asks for counts them.
  // Other runs' sandboxes (helpers running Stryker side by side) are never copied into this one's.
  ignorePatterns: ["/.stryker-tmp*"],
  incremental: true,
  reporters: ["clear-text", "progress", "html", "json"],
  thresholds: { high: 90, low: 80, break: null },
  // The runtime suites wait on events over scripted providers; give a slow mutant room before calling it a timeout.
  timeoutMS: 10_000,
};
