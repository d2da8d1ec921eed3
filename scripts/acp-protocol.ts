/**
 * ACP protocol bindings: regenerates src/adapters/acp/protocol/sdk.ts, the module that re-exports exactly the ACP SDK
 * types the ACP adapter is typed against, from the installed SDK's unstable entry (`@agentclientprotocol/sdk/unstable`:
 * session/fork, session/resume and session/close are in it), and checks that the committed module and MANIFEST.json
 * reproduce byte for byte (default), or rewrites them (`--write`). Each used type is found by following the entry's
 * declaration files (`export *`, `export type *`, `export { ... } from`) to the file that declares it: a type the
 * entry does not export fails the generation. MANIFEST.json records the SDK version and the sha256 of every
 * declaration file on the way to a used type, of the ACP JSON schemas the SDK ships, and of the generated module: a
 * new SDK whose declarations or schemas differ fails the check until the bindings are regenerated and the adapter
 * compiles against them.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { format, resolveConfig } from "prettier";

const SDK = "@agentclientprotocol/sdk";
/** The SDK entry the bindings re-export from, by its name in the SDK's `exports`. */
const ENTRY = "./unstable";
const PROTOCOL = join(import.meta.dirname, "..", "src", "adapters", "acp", "protocol");
const MODULE = "sdk.ts";
const GENERATOR = "scripts/acp-protocol.ts";

/** What the adapter uses, sorted: nothing else is re-exported. A new one: add it, `npm run protocol:acp -- --write`. */
export const USED = [
  "AnyMessage",
  "ClientApp",
  "ClientConnection",
  "ContentBlock",
  "InitializeResponse",
  "JsonRpcId",
  "PermissionOption",
  "PromptResponse",
  "RequestPermissionRequest",
  "RequestPermissionResponse",
  "SessionConfigOption",
  "SessionNotification",
  "SessionUpdate",
  "ToolCall",
  "ToolCallContent",
  "ToolCallUpdate",
  "ToolKind",
];

/** The ACP JSON schemas the SDK ships (package-relative): hashed, the protocol the SDK's types are generated from. */
const SCHEMAS = ["schema/v1/schema.json", "schema/v1/schema.unstable.json"];

export interface Manifest {
  sdk: string;
  version: string;
  generator: string;
  entry: string;
  declarations: Record<string, string>;
  schemas: Record<string, string>;
  files: Record<string, string>;
}

const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");

/** The SDK's directory: the nearest one above its main module whose package.json names it. */
function packageDir(): string {
  let dir = dirname(createRequire(import.meta.url).resolve(SDK));
  for (;;) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name === SDK)
      return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json of ${SDK} above its main module`);
    dir = dirname(dir);
  }
}

interface PackageJson {
  version: string;
  exports: Record<string, { types?: string }>;
}

/** The declaration file a relative module specifier of `from` names (`./x.js` is declared by `./x.d.ts`). */
function declarationOf(from: string, specifier: string): string {
  const base = join(dirname(from), specifier.replace(/\.(m|c)?js$/, ""));
  const file = [`${base}.d.ts`, join(base, "index.d.ts")].find((f) => existsSync(f));
  if (!file) throw new Error(`${from}: no declaration file for "${specifier}"`);
  return file;
}

/** The names an `export { a, b as c, type d }` list exports, each with the name it has in the module it is from. */
function exportList(list: string): Array<{ exported: string; local: string }> {
  return list
    .split(",")
    .map((entry) => entry.trim().replace(/^type\s+/, ""))
    .filter(Boolean)
    .map((entry) => {
      const [local, exported = local] = entry.split(/\s+as\s+/);
      return { exported: exported!, local: local! };
    });
}

/**
 * The declaration files from `file` to the one that declares what `file` exports as `name` (`file` first), or
 * empty when `file` does not export it. A module's own exports come before its `export *`, as TypeScript's do.
 */
function exportPath(file: string, name: string, text: (file: string) => string, seen = new Set<string>()): string[] {
  if (seen.has(file)) return [];
  seen.add(file);
  const source = text(file);
  const declared = new RegExp(
    `^export (declare )?(abstract )?(type|interface|class|function|const|let|var|enum|namespace) ${name}\\b`,
    "m",
  );
  if (declared.test(source)) return [file];
  for (const m of source.matchAll(/^export (?:type )?\{([^}]*)\} from "([^"]+)";/gm)) {
    const entry = exportList(m[1]!).find((e) => e.exported === name);
    if (!entry) continue;
    const rest = exportPath(declarationOf(file, m[2]!), entry.local, text, new Set());
    if (rest.length === 0) throw new Error(`${file} re-exports ${name} from "${m[2]}", which does not export it`);
    return [file, ...rest];
  }
  for (const m of source.matchAll(/^export (?:type )?\* from "([^"]+)";/gm)) {
    const rest = exportPath(declarationOf(file, m[1]!), name, text, seen);
    if (rest.length > 0) return [file, ...rest];
  }
  return [];
}

/**
 * The bindings the installed SDK gives for the types `used` (default: the adapter's): the module's text and the
 * manifest describing it. Throws if the SDK's entry does not export one of them.
 */
export async function generate(used: readonly string[] = USED): Promise<{ module: string; manifest: Manifest }> {
  const twice = used.filter((name, i) => used.indexOf(name) !== i);
  if (twice.length > 0) throw new Error(`listed twice: ${twice.join(", ")}`);
  const dir = packageDir();
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as PackageJson;
  const types = pkg.exports[ENTRY]?.types;
  if (!types) throw new Error(`${SDK} ${pkg.version} has no types for its "${ENTRY}" entry`);
  const entry = join(dir, types);
  const texts = new Map<string, string>();
  const text = (file: string) => texts.get(file) ?? texts.set(file, readFileSync(file, "utf8")).get(file)!;
  const files = new Set<string>();
  const from = `${SDK}/${ENTRY.replace(/^\.\//, "")}`;
  for (const name of used) {
    const path = exportPath(entry, name, text);
    if (path.length === 0) throw new Error(`${from} (${relative(dir, entry)}) exports no ${name}`);
    for (const file of path) files.add(relative(dir, file));
  }
  const declarations: Record<string, string> = {};
  for (const file of [...files].sort()) declarations[`${SDK}/${file}`] = sha256(text(join(dir, file)));
  const schemas: Record<string, string> = {};
  for (const file of SCHEMAS) schemas[`${SDK}/${file}`] = sha256(readFileSync(join(dir, file)));
  const source = [
    `// Generated from ${SDK} ${pkg.version} by ${GENERATOR}: do not edit.`,
    "// The ACP SDK types the ACP adapter is typed against, and no other (the SDK's unstable entry: session/fork,",
    "// session/resume and session/close are in it).",
    `export type { ${[...used].sort().join(", ")} } from "${from}";`,
    "",
  ].join("\n");
  const module = await format(source, { ...(await resolveConfig(join(PROTOCOL, MODULE))), parser: "typescript" });
  const manifest: Manifest = {
    sdk: SDK,
    version: pkg.version,
    generator: GENERATOR,
    entry: from,
    declarations,
    schemas,
    files: { [MODULE]: sha256(module) },
  };
  return { module, manifest };
}

const manifestText = (manifest: Manifest) => `${JSON.stringify(manifest, null, 2)}\n`;

/**
 * What differs between the installed SDK's bindings and the committed ones in `protocol` (default: the adapter's);
 * empty when they reproduce.
 */
export async function check(protocol = PROTOCOL): Promise<string[]> {
  const { module, manifest } = await generate();
  const read = (file: string) => (existsSync(join(protocol, file)) ? readFileSync(join(protocol, file), "utf8") : "");
  const missing = [MODULE, "MANIFEST.json"].filter((file) => !existsSync(join(protocol, file)));
  if (missing.length > 0) return missing.map((file) => `protocol/${file} does not exist`);
  const committed = JSON.parse(read("MANIFEST.json")) as Manifest;
  const problems: string[] = [];
  if (committed.version !== manifest.version)
    problems.push(`MANIFEST.json says ${SDK} ${committed.version}, the installed SDK is ${manifest.version}`);
  for (const files of ["declarations", "schemas"] as const)
    for (const [file, hash] of Object.entries(manifest[files]))
      if (committed[files]?.[file] !== hash) problems.push(`${file} differs from the one MANIFEST.json records`);
  if (read(MODULE) !== module) problems.push(`protocol/${MODULE} does not reproduce`);
  if (problems.length === 0 && read("MANIFEST.json") !== manifestText(manifest))
    problems.push("MANIFEST.json does not reproduce");
  return problems;
}

async function main(): Promise<void> {
  if (process.argv.includes("--write")) {
    const { module, manifest } = await generate();
    writeFileSync(join(PROTOCOL, MODULE), module);
    writeFileSync(join(PROTOCOL, "MANIFEST.json"), manifestText(manifest));
    console.log(`wrote protocol/${MODULE} and MANIFEST.json for ${SDK} ${manifest.version}`);
    return;
  }
  const problems = await check();
  if (problems.length > 0) {
    console.error(`${problems.join("\n")}\nregenerate with: npm run protocol:acp -- --write`);
    process.exitCode = 1;
  } else console.log(`${SDK}: protocol/${MODULE} and MANIFEST.json reproduce from the installed declarations`);
}

if (process.argv[1] && import.meta.filename === process.argv[1])
  await main().catch((error: unknown) => {
    console.error(`${SDK}: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  });
