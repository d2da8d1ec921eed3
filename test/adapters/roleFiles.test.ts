import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * Every provider folder has the role files of src/adapters/README.md and nothing else at top level (`host/` only
 * where the provider runs in a child process, `agents.ts` only where one adapter drives many agents); its `protocol/`
 * has a MANIFEST whose hashes are those of its files.
 */

const ADAPTERS = join(import.meta.dirname, "../../src/adapters");
const REQUIRED = [
  "adapter.ts",
  "transport.ts",
  "mapper.ts",
  "capabilities.ts",
  "tools.ts",
  "protocol",
  "GAP.md",
  "index.ts",
];
const ALLOWED = new Set([...REQUIRED, "host", "agents.ts"]);
const providers = readdirSync(ADAPTERS, { withFileTypes: true })
  .filter((e) => e.isDirectory() && e.name !== "kit")
  .map((e) => e.name);

describe("provider folders", () => {
  it("exist for the scripted, Codex and Claude providers", () => {
    expect(providers).toEqual(expect.arrayContaining(["scripted", "codex", "claude"]));
  });

  for (const provider of providers) {
    it(`${provider}: the role files, and nothing else at top level`, () => {
      const entries = readdirSync(join(ADAPTERS, provider));
      expect(entries.filter((e) => !ALLOWED.has(e))).toEqual([]);
      expect(REQUIRED.filter((r) => !entries.includes(r))).toEqual([]);
      expect(existsSync(join(ADAPTERS, provider, "protocol", "MANIFEST.json"))).toBe(true);
    });
  }

  it("scripted: its protocol MANIFEST names the sha256 of each protocol file", () => {
    const dir = join(ADAPTERS, "scripted", "protocol");
    const manifest = JSON.parse(readFileSync(join(dir, "MANIFEST.json"), "utf8")) as { files: Record<string, string> };
    const listed = Object.keys(manifest.files).sort();
    expect(listed).toEqual(
      readdirSync(dir)
        .filter((f) => f !== "MANIFEST.json")
        .sort(),
    );
    for (const [file, sha] of Object.entries(manifest.files))
      expect([
        file,
        createHash("sha256")
          .update(readFileSync(join(dir, file)))
          .digest("hex"),
      ]).toEqual([file, sha]);
  });
});
