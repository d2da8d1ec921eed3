import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { defineCapabilities, minimalCapabilities, type ProviderCapabilities } from "../../src/index.js";
import { generatePaths } from "../../src/conformance/model.js";
import type { BehaviourKind } from "../../src/conformance/world.js";

/**
 * The conformance model on its own: which outcome the seed promises for a record (the paths xstate/graph generates),
 * and that it is written from the seed, not from the code it checks.
 */

/**
 * What conformance code may import: xstate, node, its own files, the runtime's public API, the adapter contract and
 * the package's other public entry points (the adapter kit, the model simulator).
 */
const ALLOWED = new RegExp(
  "^(xstate|xstate/graph|node:.*|\\./.*|\\.\\./index\\.js|\\.\\./adapters/contract\\.js|" +
    "\\.\\./adapters/kit/index\\.js|\\.\\./simulator/index\\.js)$",
);
/** An import of named values from the public API or the kit. */
const PUBLIC_IMPORT = /^import\s*(?:type\s*)?\{([^}]*)\}\s*from "\.\.\/(?:index|adapters\/kit\/index)\.js";/gm;
/** The runtime's capability predicates, by name (read from their source: importing them is what is checked). */
const PREDICATES = new Set(
  [
    ...readFileSync(join(import.meta.dirname, "../../src/capabilities/predicates.ts"), "utf8").matchAll(
      /^export (?:const|function) (\w+)/gm,
    ),
  ].map((m) => m[1]!),
);
const everything = new Set<BehaviourKind>(["text", "hold", "approval:command", "approval:file_change", "subagent"]);
const finals = (caps: ProviderCapabilities, scripts: ReadonlySet<BehaviourKind> = everything) =>
  generatePaths({ caps, scripts }).map((p) => p.steps.map((s) => s.state).at(-1));

describe("conformance model", () => {
  it("steers natively, by interrupt-restart, or refuses, as the record says", () => {
    expect(finals(defineCapabilities({}))).toContain("steeredDone");
    const restart = finals(defineCapabilities({ turns: { supportsActiveSteering: false } }));
    expect(restart).toContain("steerRestarted");
    expect(restart).not.toContain("steeredDone");
    const neither = finals(defineCapabilities({ turns: { supportsActiveSteering: false, supportsInterrupt: false } }));
    expect(neither).toEqual(expect.arrayContaining(["steerRefused", "interruptRefused"]));
  });

  it("forks natively, synthetically, or refuses where the provider cannot be told the conversation", () => {
    expect(finals(defineCapabilities({}))).toContain("forkNativeAnswered");
    expect(finals(defineCapabilities({ threads: { canForkThread: false } }))).toContain("forkSyntheticAnswered");
    expect(finals(minimalCapabilities())).toContain("forkRefused");
  });

  it("offers no event the world cannot script: its fields stay not exercisable", () => {
    const textOnly = finals(defineCapabilities({}), new Set<BehaviourKind>(["text", "hold"]));
    expect(textOnly.filter((s) => s?.startsWith("asked_") || s?.startsWith("approved_"))).toEqual([]);
    expect(textOnly.filter((s) => s?.includes("ubagent"))).toEqual([]);
  });

  it("imports the runtime only through its public API and the adapter contract", () => {
    const dir = join(import.meta.dirname, "../../src/conformance");
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".ts"))) {
      const source = readFileSync(join(dir, file), "utf8");
      const imports = [...source.matchAll(/^(?:import|export)\b[^;]*?from "([^"]+)";/gm)].map((m) => m[1]!);
      expect(imports.length, file).toBeGreaterThan(0);
      for (const path of imports) {
        expect(path, `${file} imports ${path}`).toMatch(ALLOWED);
      }
      // The public API and the kit re-export the runtime's capability predicates: a model that used them could not
      // catch them.
      for (const [, names] of source.matchAll(PUBLIC_IMPORT)) {
        const used = names!.split(",").map((n) => n.replace(/\btype\b/, "").trim());
        expect(
          used.filter((n) => PREDICATES.has(n)),
          file,
        ).toEqual([]);
      }
    }
  });
});
