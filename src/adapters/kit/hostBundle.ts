import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { nodeHostScript } from "./hostScript.js";

/**
 * How the host script runs when the package is not built (tests, benches, development from source): `--import tsx`
 * transpiles every module of the host in a loader thread, which measured about 0.55 s of the host's start on this
 * machine (host ready after 0.93 s under tsx, 0.3-0.4 s as compiled JS). So the host's TypeScript is bundled with
 * esbuild (tsx's own compiler) into one ES module, run by plain node like the built package. The bundle is cached under
 * `node_modules/.cache/tiller-hosts`, valid while every source it was made from keeps its size and mtime: a changed
 * source makes a new one, so a host never runs stale code. Built package (the `.js` exists), or no esbuild, or a failed
 * build: `nodeHostScript` decides as before.
 */
export function hostScript(relativeJs: string, base: string): { script: string; execArgs: string[] } {
  const chosen = nodeHostScript(relativeJs, base);
  if (chosen.execArgs.length === 0) return chosen;
  try {
    return { script: bundled(chosen.script), execArgs: [] };
  } catch {
    return chosen;
  }
}

interface Manifest {
  bundle: string;
  /** Each source of the bundle: `size:mtimeMs`. */
  inputs: Record<string, string>;
}

const fingerprint = (path: string): string => {
  const info = statSync(path);
  return `${info.size}:${info.mtimeMs}`;
};

function bundled(entry: string): string {
  const root = packageRoot(entry);
  // Bare imports (zod, the Agent SDK) resolve from here as from the sources: the package's node_modules.
  const cache = join(root, "node_modules", ".cache", "tiller-hosts");
  const manifestPath = join(cache, `${createHash("sha256").update(entry).digest("hex").slice(0, 16)}.json`);
  const cached = readManifest(manifestPath);
  if (cached) return cached.bundle;

  const esbuild = createRequire(import.meta.url)("esbuild") as typeof import("esbuild");
  const built = esbuild.buildSync({
    entryPoints: [entry],
    absWorkingDir: root,
    bundle: true,
    platform: "node",
    format: "esm",
    target: `node${process.versions.node}`,
    packages: "external",
    metafile: true,
    write: false,
    logLevel: "silent",
  });
  const code = built.outputFiles[0]!.contents;
  const bundle = join(cache, `host-${createHash("sha256").update(code).digest("hex").slice(0, 16)}.mjs`);
  mkdirSync(cache, { recursive: true });
  // Written aside, then renamed: another process may be making or reading the same bundle.
  if (!existsSync(bundle)) atomicWrite(bundle, code);
  const inputs: Record<string, string> = {};
  for (const input of Object.keys(built.metafile.inputs)) {
    const path = resolve(root, input);
    inputs[path] = fingerprint(path);
  }
  atomicWrite(manifestPath, JSON.stringify({ bundle, inputs } satisfies Manifest));
  pruneStale(cache);
  return bundle;
}

/** How old a bundle grows before a new build clears it out (a host still running it has it loaded already). */
const STALE_MS = 24 * 60 * 60 * 1000;

function pruneStale(cache: string): void {
  for (const name of readdirSync(cache)) {
    const path = join(cache, name);
    try {
      if (Date.now() - statSync(path).mtimeMs > STALE_MS) unlinkSync(path);
    } catch {
      // gone already, or another process's
    }
  }
}

function readManifest(path: string): Manifest | null {
  try {
    const manifest = JSON.parse(readFileSync(path, "utf8")) as Manifest;
    if (!existsSync(manifest.bundle)) return null;
    for (const [input, print] of Object.entries(manifest.inputs)) if (fingerprint(input) !== print) return null;
    return manifest;
  } catch {
    return null;
  }
}

function atomicWrite(path: string, content: string | Uint8Array): void {
  const aside = `${path}.${process.pid}.${Date.now()}.tmp`;
  writeFileSync(aside, content);
  renameSync(aside, path);
}

/** The nearest directory above the entry with a node_modules. */
function packageRoot(entry: string): string {
  for (let dir = dirname(entry); ; dir = dirname(dir)) {
    if (existsSync(join(dir, "node_modules"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no node_modules above ${entry}`);
  }
}
