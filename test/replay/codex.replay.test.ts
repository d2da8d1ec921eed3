import { existsSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createCodexAdapter } from "../../src/adapters/codex/adapter.js";
import { createRuntime, sequentialIds } from "../../src/index.js";
import { scenarioNames, scenarios } from "./scenarios.js";

/**
 * Replays the recorded Codex transcripts: each scenario runs against the real runtime and the
 * real Codex adapter, whose `binary` is the replay host (test/replay/codex-replay), with no
 * model simulator and no codex binary. The host checks every client frame against the
 * recording and writes its progress to a report; a test passes only when the scenario's
 * assertions hold and every recorded client frame was matched.
 * Fixtures are rewritten with `npm run record:codex`.
 */

const here = dirname(fileURLToPath(import.meta.url));
const fixturesDir = join(here, "fixtures", "codex");
const replayBinary = join(here, "codex-replay");
const fixtures = existsSync(fixturesDir) ? readdirSync(fixturesDir).filter((f) => f.endsWith(".jsonl")).sort() : [];

interface ReplayReport {
  fixture: string;
  expected: number;
  matched: number;
  error?: string;
}

async function readReport(root: string): Promise<ReplayReport | null> {
  try {
    return JSON.parse(await readFile(join(root, "codex-replay.report.json"), "utf8")) as ReplayReport;
  } catch {
    return null;
  }
}

async function replay(fixtureFile: string): Promise<void> {
  const name = basename(fixtureFile, ".jsonl");
  const scenario = scenarios[name];
  if (!scenario) throw new Error(`fixture ${fixtureFile} names no scenario in test/replay/scenarios.ts`);
  const root = await mkdtemp(join(tmpdir(), "tiller-codex-replay-"));
  try {
    const workspace = join(root, "workspace");
    const home = join(root, "home");
    const codexHome = join(root, "codex-home");
    await Promise.all([workspace, home, codexHome].map((dir) => mkdir(dir, { recursive: true })));
    const adapter = createCodexAdapter({
      binary: replayBinary,
      codexHome,
      home,
      // Part of the host key (hashed as credentials): every fixture gets its own host.
      env: { CODEX_REPLAY_FIXTURE: join(fixturesDir, fixtureFile), CODEX_REPLAY_ROOT: root },
      approvalPolicy: "untrusted",
    });
    const rt = await createRuntime({ dataDir: join(root, "data"), providers: { codex: adapter }, ids: sequentialIds(), ...scenario.runtime });
    let failure: unknown = null;
    try {
      await scenario.run({ rt, push: () => undefined, workspace });
    } catch (error) {
      failure = error;
    } finally {
      await rt.close();
    }
    const report = await readReport(root);
    // A divergence from the recording explains whatever the scenario then saw: it goes first.
    if (report?.error) throw new Error(`the client diverged from the recording:\n${report.error}`, { cause: failure ?? undefined });
    if (failure) throw failure;
    expect(report, "the replay host never started (no report)").not.toBeNull();
    expect(report!.matched, `client frames matched of the ${report!.expected} recorded`).toBe(report!.expected);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

describe("codex replay", () => {
  it("has a fixture for every scenario and a scenario for every fixture", () => {
    expect(fixtures.map((f) => basename(f, ".jsonl"))).toEqual([...scenarioNames].sort());
  });

  for (const fixture of fixtures) {
    it(`replays ${basename(fixture, ".jsonl")}`, () => replay(fixture));
  }
});
