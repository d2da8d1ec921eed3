import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { readBlock } from "../../scripts/docsBlocks.js";

const root = join(import.meta.dirname, "../..");
const run = promisify(execFile);
const readme = () => readFile(join(root, "README.md"), "utf8");

/**
 * The README a newcomer reads: short, its example the file the tests run, every doc linked,
 * and no provider named that does not exist. What it used to hold lives in docs/ (the docs
 * tests keep that honest); the packaged example runs in pack.test.ts.
 */
describe("README", () => {
  it("shows the embedding example verbatim, and the example runs", async () => {
    const example = await readFile(join(root, "examples/embedding.ts"), "utf8");
    expect(readBlock(await readme(), "example examples/embedding.ts")).toBe(`\`\`\`ts\n${example}\`\`\``);

    const cwd = await mkdtemp(join(tmpdir(), "tiller-example-"));
    try {
      const tsx = join(root, "node_modules/tsx/dist/cli.mjs");
      // In the repository, `tiller-runtime` resolves to the package itself (its own name, through "exports", to dist/).
      const { stdout } = await run(process.execPath, [tsx, join(root, "examples/embedding.ts")], {
        cwd,
        timeout: 60_000,
      });
      expect(stdout).toMatch(/run run_\w+ completed/);
      expect(stdout).toContain("command deployed");
      expect(stdout).toContain("status: completed | capabilities version: 1");
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  }, 60_000);

  it("is read in ten minutes: at most 12 KB", async () => {
    expect(Buffer.byteLength(await readme())).toBeLessThanOrEqual(12 * 1024);
  });

  it("links every doc", async () => {
    const text = await readme();
    const docs = (await readdir(join(root, "docs"))).filter((f) => f.endsWith(".md"));
    expect(docs.filter((doc) => !text.includes(`(docs/${doc})`))).toEqual([]);
  });

  it("names only providers that exist", async () => {
    const text = await readme();
    for (const planned of [/OpenCode/i, /Aider/i, /Cursor/i]) expect(text).not.toMatch(planned);
    for (const provider of ["Codex", "Claude Code", "ACP", "Gemini CLI", "claude-agent-acp", "codex-acp"])
      expect(text).toContain(provider);
    expect(text).toContain("scripted provider");
  });

  it("imports the published name, never the unrelated `tiller` package", async () => {
    const text = await readme();
    expect(text).toContain('from "tiller-runtime"');
    expect(text).not.toMatch(/from "tiller(\/[a-z]+)?"/);
  });
});
