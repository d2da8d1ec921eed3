import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, readdir, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The package as users get it: `npm pack`, installed into a clean folder outside the
 * repository (dependencies from the npm cache `npm ci` filled, the registry only for what it
 * lacks), then the examples, their types and the `tiller` command run from there, resolving
 * `tiller-runtime` to the installed copy. Needs dist/ (`npm test` builds it first).
 */

const root = join(import.meta.dirname, "../..");
const run = promisify(execFile);
const tsx = join(root, "node_modules/tsx/dist/cli.mjs");
const tsc = join(root, "node_modules/typescript/bin/tsc");
const INSTALL_LIMIT_MS = 120_000;

/**
 * Our npm's environment minus what npm sets for the script that runs the tests (the child's own package is another).
 */
function npmEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !/^npm_(package|lifecycle)_|^npm_command$|^INIT_CWD$/.test(key)),
  );
  return { ...env, npm_config_update_notifier: "false", npm_config_fund: "false", npm_config_audit: "false" };
}

/** Values the kit's entry point must export (its types are checked by compiling the outside adapter against it). */
const KIT_NAMES = [
  "KIT_VERSION",
  "defineAdapter",
  "SERVED_BY",
  "EventQueue",
  "hosted",
  "HostSessions",
  "StdioChannel",
  "WebSocketChannel",
  "RpcChannel",
  "FrameRing",
  "nodeHostScript",
  "readLines",
  "resolveLimits",
  "HOST_LINE_LIMITS",
  "deliverContext",
  "userPrompt",
  "userContextMessages",
  "defineCapabilities",
  "fullCapabilities",
  "minimalCapabilities",
  "parseCapabilities",
  "ProviderEventSchema",
  "ResumeFailedError",
  "ProtocolError",
  "HostUnavailableError",
  "CapabilityUnsupportedError",
  "InvalidInputError",
  "ProviderError",
];

/** Typechecks the folder's TypeScript files against the installed package's own types, strictly. */
async function typecheck(dir: string): Promise<void> {
  const tsconfig = {
    compilerOptions: {
      target: "ES2023",
      lib: ["ES2023"],
      module: "NodeNext",
      moduleResolution: "NodeNext",
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: ["node"],
      typeRoots: [join(root, "node_modules/@types")],
    },
    include: ["*.ts"],
  };
  await writeFile(join(dir, "tsconfig.json"), JSON.stringify(tsconfig));
  await run(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: dir, timeout: 60_000 });
}

let work = "";
let app = "";
let packed: { name: string; version: string; filename: string; files: Array<{ path: string }> };
let examples: string[] = [];

beforeAll(async () => {
  for (const built of [
    "dist/index.js",
    "dist/cli/main.js",
    "dist/simulator/index.js",
    "dist/adapters/codex/index.js",
    "dist/adapters/claude/index.js",
  ]) {
    if (!existsSync(join(root, built))) throw new Error(`${built} is missing: run npm run build first (npm test does)`);
  }
  work = await realpath(await mkdtemp(join(tmpdir(), "tiller-pack-")));
  app = join(work, "app");
  await mkdir(app);
  // The build is the one under test: no prepare script (it would rebuild) during pack.
  const { stdout } = await run("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", work], {
    cwd: root,
    env: npmEnv(),
    timeout: INSTALL_LIMIT_MS,
  });
  [packed] = JSON.parse(stdout) as [typeof packed];

  await writeFile(
    join(app, "package.json"),
    JSON.stringify({ name: "tiller-pack-check", private: true, type: "module" }),
  );
  examples = (await readdir(join(root, "examples"))).filter((f) => f.endsWith(".ts"));
  for (const example of examples) await copyFile(join(root, "examples", example), join(app, example));
  const install = [
    "install",
    "--prefer-offline",
    "--ignore-scripts",
    "--no-audit",
    "--no-fund",
    "--loglevel=error",
    join(work, packed.filename),
  ];
  await run("npm", install, { cwd: app, env: npmEnv(), timeout: INSTALL_LIMIT_MS });
}, INSTALL_LIMIT_MS * 2);

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

describe("the packed package", () => {
  it("is tiller-runtime, with the build, the command and the inspector page, and no sources or tests", () => {
    expect(packed.name).toBe("tiller-runtime");
    const paths = packed.files.map((f) => f.path);
    for (const file of [
      "package.json",
      "README.md",
      "bin/tiller.js",
      "dist/index.js",
      "dist/index.d.ts",
      "dist/cli/main.js",
    ])
      expect(paths).toContain(file);
    expect(paths.some((p) => p.startsWith("inspector/page/"))).toBe(true);
    expect(paths.filter((p) => /^(src|test|scripts|bench|examples|docs)\//.test(p))).toEqual([]);
  });

  it("resolves every entry point to the installed copy", async () => {
    const probe = `
      const out = {};
      for (const [entry, names] of Object.entries({
        "tiller-runtime": ["createRuntime", "createScriptedAdapter", "keyedScript", "DEGRADATIONS"],
        "tiller-runtime/simulator": ["startModelSimulator"],
        "tiller-runtime/codex": ["createCodexAdapter", "codexSimulatorOptions"],
        "tiller-runtime/claude": ["createClaudeAdapter"],
        "tiller-runtime/acp": ["createAcpAdapter", "acpCapabilities", "geminiAgent", "claudeAgent", "codexAgent"],
        "tiller-runtime/kit": ${JSON.stringify(KIT_NAMES)},
        "tiller-runtime/conformance": ["runConformance", "assertConformance", "simulatorWorld", "scriptedWorld"],
      })) {
        const module = await import(entry);
        out[entry] = { at: import.meta.resolve(entry), exports: names.filter((n) => module[n] !== undefined) };
      }
      console.log(JSON.stringify(out));`;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", probe], { cwd: app, timeout: 60_000 });
    const entries = JSON.parse(stdout) as Record<string, { at: string; exports: string[] }>;
    expect(Object.keys(entries)).toHaveLength(7);
    for (const [entry, { at, exports }] of Object.entries(entries)) {
      expect(at, entry).toContain(`file://${app}/node_modules/tiller-runtime/dist/`);
      expect(exports.length, entry).toBeGreaterThan(0);
    }
    expect(entries["tiller-runtime"]!.exports).toHaveLength(4);
    expect(entries["tiller-runtime/codex"]!.exports).toHaveLength(2);
    expect(entries["tiller-runtime/acp"]!.exports).toHaveLength(5);
    expect(entries["tiller-runtime/kit"]!.exports).toEqual(KIT_NAMES);
    expect(entries["tiller-runtime/conformance"]!.exports).toHaveLength(4);
  }, 60_000);

  it("runs every example from the clean folder", async () => {
    expect(examples).toEqual(expect.arrayContaining(["embedding.ts", "simulator.ts"]));
    const outputs: Record<string, string> = {};
    for (const example of examples) {
      outputs[example] = (await run(process.execPath, [tsx, example], { cwd: app, timeout: 60_000 })).stdout;
    }
    expect(outputs["embedding.ts"]).toContain("status: completed | capabilities version: 1");
    expect(outputs["simulator.ts"]).toContain("reply: Hello from the simulator.");
    expect(outputs["simulator.ts"]).toContain("x-api-key: [redacted]");
  }, 120_000);

  it("typechecks the examples against the package's own types", async () => {
    await typecheck(app);
  }, 60_000);

  it("installs the tiller command, which runs the demo", async () => {
    const bin = join(app, "node_modules/.bin/tiller");
    expect((await run(bin, ["version"], { cwd: app, timeout: 30_000 })).stdout).toContain(`tiller ${packed.version}`);
    const { stdout } = await run(bin, ["demo", "--yes", "--no-color", "--data-dir", join(app, "demo")], {
      cwd: app,
      timeout: 60_000,
    });
    expect(stdout).toContain("Runs: #1 completed, #2 interrupted, #3 completed");
  }, 60_000);
});

/**
 * docs/adding-a-provider.md walks an adapter written outside this repository from `npm init` to a passing conformance
 * run: here, in an empty folder, its commands run as written (the package installed from the tarball in place of the
 * registry) and its files are the ones the doc shows, read from the Markdown.
 */
describe("an adapter of your own, as docs/adding-a-provider.md writes it", () => {
  let outside = "";
  let runs: string[] = [];
  let files: Record<string, string> = {};
  const sh = (line: string, timeout: number) => run("sh", ["-c", line], { cwd: outside, env: npmEnv(), timeout });

  beforeAll(async () => {
    const doc = await readFile(join(root, "docs/adding-a-provider.md"), "utf8");
    const blocks = [...doc.matchAll(/^```(\w+) ?([^\n]*)\n([\s\S]*?)^```$/gm)].map(([, , info, body]) => ({
      info: info!,
      body: body!,
    }));
    files = Object.fromEntries(
      blocks.flatMap(({ info, body }) => (info.startsWith("file=") ? [[info.slice(5), body]] : [])),
    );
    const commands = blocks.filter((b) => b.info === "run").flatMap((b) => b.body.split("\n").filter(Boolean));
    const at = commands.findIndex((line) => line.startsWith("npx "));
    runs = commands.slice(at);
    outside = join(work, "outside");
    await mkdir(outside);
    for (const line of commands.slice(0, at)) {
      const tarball = JSON.stringify(join(work, packed.filename));
      const install = /^npm install /.test(line);
      const command = install
        ? `${line.replace(/\btiller-runtime\b/, tarball)} --prefer-offline --no-audit --no-fund --loglevel=error`
        : line;
      await sh(command, INSTALL_LIMIT_MS);
    }
    for (const [name, text] of Object.entries(files)) await writeFile(join(outside, name), text);
  }, INSTALL_LIMIT_MS * 2);

  it("shows the package's files and how to set it up and run it", () => {
    expect(Object.keys(files).sort()).toEqual(["adapter.ts", "conformance.ts"]);
    expect(runs).toEqual(["npx tsx conformance.ts"]);
    expect(files["adapter.ts"]).toContain(`from "tiller-runtime/kit"`);
  });

  it("resolves tiller-runtime/kit to the installed copy, typed", async () => {
    const probe = `const kit = await import("tiller-runtime/kit");
      console.log(JSON.stringify({ at: import.meta.resolve("tiller-runtime/kit"), version: kit.KIT_VERSION }));`;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", probe], {
      cwd: outside,
      timeout: 30_000,
    });
    expect(JSON.parse(stdout)).toEqual({
      at: `file://${outside}/node_modules/tiller-runtime/dist/adapters/kit/index.js`,
      version: 1,
    });
    await typecheck(outside);
  }, 90_000);

  it("passes the conformance suite: the adapter's record verified, none refuted", async () => {
    const { stdout } = await sh(runs[0]!, 240_000);
    expect(stdout).toMatch(/^conformance: chat declared \d+, verified [1-9]\d*, refuted 0, /m);
    expect(stdout).toMatch(/^turns\.supportsInterrupt +true +verified /m);
  }, 300_000);
});
