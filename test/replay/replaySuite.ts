import { existsSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { describe, expect, it } from "vitest";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { sequentialIds } from "../../src/index.js";
import { fixturesDir } from "./record.js";
import type { Scenario } from "./scenarios.js";
import { openRuntime } from "../support/internals.js";

/**
 * Replays recorded transcripts: each scenario runs against the real runtime and the real
 * adapter, whose provider process is a replay host that checks every client frame against
 * the recording and writes its progress to a report. No model simulator, no provider binary.
 * A test passes only when the scenario's assertions hold and every recorded client frame
 * was matched.
 */

interface ReplayReport {
  fixture: string;
  expected: number;
  matched: number;
  error?: string;
}

export interface ReplayDirs {
  root: string;
  workspace: string;
  home: string;
  fixture: string;
}

export interface ReplaySuiteOptions {
  /** The fixtures' directory under test/replay/fixtures (default: the provider's name). */
  fixtures?: string;
}

export function replaySuite(
  provider: string,
  replayHost: string,
  scenarios: Record<string, Scenario>,
  makeAdapter: (dirs: ReplayDirs) => ProviderAdapter,
  options: ReplaySuiteOptions = {},
): void {
  const dir = fixturesDir(options.fixtures ?? provider);
  const fixtures = existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => f.endsWith(".jsonl"))
        .sort()
    : [];

  async function replay(fixtureFile: string): Promise<void> {
    const name = basename(fixtureFile, ".jsonl");
    const scenario = scenarios[name];
    if (!scenario) throw new Error(`fixture ${fixtureFile} names no ${provider} scenario`);
    const root = await mkdtemp(join(tmpdir(), `tiller-${provider}-replay-`));
    try {
      const dirs = {
        root,
        workspace: join(root, "workspace"),
        home: join(root, "home"),
        fixture: join(dir, fixtureFile),
      };
      await Promise.all([dirs.workspace, dirs.home].map((d) => mkdir(d, { recursive: true })));
      const rt = await openRuntime({
        dataDir: join(root, "data"),
        providers: { [provider]: makeAdapter(dirs) },
        ids: sequentialIds(),
        ...scenario.runtime,
      });
      let failure: unknown = null;
      try {
        await scenario.run({ rt, push: () => undefined, workspace: dirs.workspace });
      } catch (error) {
        failure = error;
      } finally {
        await rt.close();
      }
      const report = await readFile(join(root, `${replayHost}.report.json`), "utf8").then(
        (t) => JSON.parse(t) as ReplayReport,
        () => null,
      );
      // A divergence from the recording explains whatever the scenario then saw: it goes first.
      if (report?.error)
        throw new Error(`the client diverged from the recording:\n${report.error}`, { cause: failure ?? undefined });
      if (failure) throw failure;
      expect(report, "the replay host never started (no report)").not.toBeNull();
      expect(report!.matched, `client frames matched of the ${report!.expected} recorded`).toBe(report!.expected);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  }

  describe(`${provider} replay`, () => {
    it("has a fixture for every scenario and a scenario for every fixture", () => {
      expect(fixtures.map((f) => basename(f, ".jsonl"))).toEqual(Object.keys(scenarios).sort());
    });
    for (const fixture of fixtures) it(`replays ${basename(fixture, ".jsonl")}`, () => replay(fixture));
  });
}
