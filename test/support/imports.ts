import { readdir, readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The import graph of src/: relative imports of every module, type-only imports included. */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const SRC = join(ROOT, "src");

async function modules(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((e) =>
      e.isDirectory() ? modules(join(dir, e.name)) : Promise.resolve(e.name.endsWith(".ts") ? [join(dir, e.name)] : []),
    ),
  );
  return nested.flat();
}

/** Every `from "./x.js"` / `import("./x.js")` of a module, resolved to a src path. */
function importsOf(file: string, text: string): string[] {
  const specifiers = [...text.matchAll(/(?:from\s+|import\s*\(\s*)["'](\.{1,2}\/[^"']+)["']/g)].map((m) => m[1]!);
  return specifiers.map((s) => resolve(dirname(file), s.replace(/\.js$/, ".ts")));
}

export async function importGraph(): Promise<Map<string, string[]>> {
  const graph = new Map<string, string[]>();
  for (const file of await modules(SRC)) {
    const name = relative(ROOT, file);
    graph.set(
      name,
      importsOf(file, await readFile(file, "utf8"))
        .map((p) => relative(ROOT, p))
        .filter((p) => p.startsWith("src/")),
    );
  }
  return graph;
}

/** Strongly connected components with more than one module (or a module importing itself). */
export function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const stack: string[] = [];
  const on = new Set<string>();
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const found: string[][] = [];
  const visit = (v: string) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const component: string[] = [];
      for (let w = stack.pop()!; ; w = stack.pop()!) {
        on.delete(w);
        component.push(w);
        if (w === v) break;
      }
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return found;
}

/** Layers (docs/architecture.md): a module may import only from its own layer and those below it. */
const LAYERS: Array<[string, string[]]> = [
  // The capability record is domain vocabulary (a session's start event carries it).
  ["src/domain/", ["src/domain/", "src/capabilities/schema.ts"]],
  ["src/capabilities/", ["src/domain/", "src/capabilities/"]],
  // An adapter may be handed the runtime's host registry, as the kit's port (`HostLeases`).
  ["src/adapters/contract.ts", ["src/domain/", "src/capabilities/", "src/adapters/kit/hostSpec.ts"]],
  // Adapters (and their kit) never reach into the runtime: what they need of it is a port of the contract or the kit.
  ["src/adapters/", ["src/domain/", "src/capabilities/", "src/machines/hostSupervisor.ts", "src/adapters/"]],
  ["src/machines/", ["src/domain/", "src/capabilities/", "src/machines/", "src/adapters/contract.ts"]],
];

export async function importViolations(): Promise<string[]> {
  const graph = await importGraph();
  const violations = cycles(graph).map((c) => `cycle: ${c.join(" -> ")}`);
  for (const [file, imports] of graph) {
    const rule = LAYERS.find(([prefix]) => file.startsWith(prefix));
    if (!rule) continue;
    for (const target of imports)
      if (!rule[1].some((allowed) => target.startsWith(allowed))) violations.push(`layer: ${file} imports ${target}`);
  }
  return violations;
}
