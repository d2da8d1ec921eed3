import { createHash } from "node:crypto";
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { check, generate, USED, type Manifest } from "../../scripts/acp-protocol.js";

/**
 * The ACP adapter's bindings (`protocol/`) against the installed SDK: they reproduce from its declarations,
 * MANIFEST.json holds the hashes of the files they come from and of the generated module, a type the SDK's unstable
 * entry does not export fails the generation, and they are where the adapter's SDK types come from.
 */

const root = join(import.meta.dirname, "..", "..");
const modules = join(root, "node_modules");
const folder = join(root, "src", "adapters", "acp");
const protocol = join(folder, "protocol");
const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");
const manifest = async () => JSON.parse(await readFile(join(protocol, "MANIFEST.json"), "utf8")) as Manifest;

/** The names of the `export type { ... }` / `import type { ... }` lists matched in `text`. */
const names = (text: string, pattern: RegExp) =>
  [...text.matchAll(pattern)].flatMap((m) =>
    m[1]!
      .split(",")
      .map((n) => n.trim())
      .filter(Boolean),
  );

describe("acp protocol bindings", () => {
  it("reproduce from the installed SDK's declarations (npm run protocol:acp)", async () => {
    expect(await check()).toEqual([]);
  });

  it("MANIFEST.json records the SDK, its declarations and schemas, and the module, by their sha256", async () => {
    const recorded = await manifest();
    const sdk = JSON.parse(await readFile(join(modules, "@agentclientprotocol", "sdk", "package.json"), "utf8")) as {
      version: string;
    };
    expect([recorded.sdk, recorded.version, recorded.generator, recorded.entry]).toEqual([
      "@agentclientprotocol/sdk",
      sdk.version,
      "scripts/acp-protocol.ts",
      "@agentclientprotocol/sdk/unstable",
    ]);
    // The unstable entry, the module it re-exports, the generated schema types and the JSON-RPC types.
    expect(Object.keys(recorded.declarations)).toEqual([
      "@agentclientprotocol/sdk/dist/core/jsonrpc.d.ts",
      "@agentclientprotocol/sdk/dist/v1/acp.d.ts",
      "@agentclientprotocol/sdk/dist/v1/unstable/acp.d.ts",
      "@agentclientprotocol/sdk/dist/v1/unstable/schema/types.gen.d.ts",
    ]);
    expect(Object.keys(recorded.schemas)).toEqual([
      "@agentclientprotocol/sdk/schema/v1/schema.json",
      "@agentclientprotocol/sdk/schema/v1/schema.unstable.json",
    ]);
    for (const [file, hash] of Object.entries({ ...recorded.declarations, ...recorded.schemas }))
      expect([file, sha256(await readFile(join(modules, file)))]).toEqual([file, hash]);
    const files = (await readdir(protocol)).filter((f) => f !== "MANIFEST.json").sort();
    expect(Object.keys(recorded.files).sort()).toEqual(files);
    for (const [file, hash] of Object.entries(recorded.files))
      expect([file, sha256(await readFile(join(protocol, file)))]).toEqual([file, hash]);
  });

  it("fail the check once the SDK's declarations or the module are not those MANIFEST.json records", async () => {
    const copy = await mkdtemp(join(tmpdir(), "acp-protocol-"));
    try {
      await cp(protocol, copy, { recursive: true });
      const tampered = await manifest();
      const declaration = "@agentclientprotocol/sdk/dist/v1/unstable/schema/types.gen.d.ts";
      const schema = "@agentclientprotocol/sdk/schema/v1/schema.unstable.json";
      expect(tampered.declarations[declaration]).toMatch(/^[0-9a-f]{64}$/);
      expect(tampered.schemas[schema]).toMatch(/^[0-9a-f]{64}$/);
      // As a manifest written from another SDK release reads against this one.
      tampered.declarations[declaration] = "0".repeat(64);
      tampered.schemas[schema] = "0".repeat(64);
      tampered.version = "0.0.1";
      await writeFile(join(copy, "MANIFEST.json"), JSON.stringify(tampered, null, 2));
      await writeFile(join(copy, "sdk.ts"), (await readFile(join(copy, "sdk.ts"), "utf8")).replace("ToolKind,\n", ""));
      expect(await check(copy)).toEqual([
        `MANIFEST.json says @agentclientprotocol/sdk 0.0.1, the installed SDK is ${(await manifest()).version}`,
        `${declaration} differs from the one MANIFEST.json records`,
        `${schema} differs from the one MANIFEST.json records`,
        "protocol/sdk.ts does not reproduce",
      ]);
      // The hashes right, the manifest written otherwise: still not the generator's.
      await cp(join(protocol, "sdk.ts"), join(copy, "sdk.ts"));
      await writeFile(join(copy, "MANIFEST.json"), JSON.stringify(await manifest()));
      expect(await check(copy)).toEqual(["MANIFEST.json does not reproduce"]);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });

  it("are generated only for types the SDK's unstable entry exports", async () => {
    await expect(generate([...USED, "NoSuchType"])).rejects.toThrow(
      "@agentclientprotocol/sdk/unstable (dist/v1/unstable/acp.d.ts) exports no NoSuchType",
    );
    // Declared in the SDK, but not exported by the unstable entry.
    await expect(generate(["ConnectionContext"])).rejects.toThrow("exports no ConnectionContext");
    await expect(generate(["ToolKind", "ToolKind"])).rejects.toThrow("listed twice: ToolKind");
  });

  it("re-export exactly the listed types, sorted, from the SDK's unstable entry", async () => {
    const bindings = await readFile(join(protocol, "sdk.ts"), "utf8");
    expect(USED).toEqual([...USED].sort());
    expect(names(bindings, /export type \{([^}]*)\} from "@agentclientprotocol\/sdk\/unstable"/g)).toEqual(USED);
    expect(bindings.match(/^export /gm)).toHaveLength(1);
  });

  it("are where the adapter's SDK types come from", async () => {
    const files = (await readdir(folder, { recursive: true }))
      .filter((f) => f.endsWith(".ts") && !f.startsWith("protocol"))
      .sort();
    const sources = await Promise.all(files.map((f) => readFile(join(folder, f), "utf8")));
    // The adapter imports the SDK's functions and values; every type it uses is a binding.
    const fromSdk = sources.flatMap((text) =>
      [...text.matchAll(/import (type )?\{([^}]*)\} from "@agentclientprotocol\/sdk[^"]*"/g)].map((m) => m[0]),
    );
    expect(fromSdk.filter((line) => /import type|[{,]\s*type\s/.test(line))).toEqual([]);
    const imported = new Set(
      sources.flatMap((text) => names(text, /import type \{([^}]*)\} from "(?:\.\.\/|\.\/)+protocol\/sdk\.js"/g)),
    );
    expect([...imported].filter((name) => !USED.includes(name))).toEqual([]);
    // And every binding is used: none is kept for nothing.
    expect(USED.filter((name) => !imported.has(name))).toEqual([]);
  });
});
