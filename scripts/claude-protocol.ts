/**
 * Claude protocol bindings: regenerates src/adapters/claude/protocol/sdk.ts, the module that re-exports exactly the
 * Agent SDK types the Claude adapter is typed against, from the installed SDK's declarations, and checks that the
 * committed module and MANIFEST.json reproduce byte for byte (default), or rewrites them (`--write`). MANIFEST.json
 * records the SDK version and the sha256 of every declaration file the types come from (the SDK's own and the
 * Anthropic API types its messages are made of) and of the generated module: a new SDK whose declarations differ
 * fails the check until the bindings are regenerated and the adapter compiles against them.
 */
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { format, resolveConfig } from "prettier";

const SDK = "@anthropic-ai/claude-agent-sdk";
/** The Anthropic API types (`BetaMessage`, `MessageParam`...) the SDK's messages are declared with. */
const API = "@anthropic-ai/sdk";
const PROTOCOL = join(import.meta.dirname, "..", "src", "adapters", "claude", "protocol");
const MODULE = "sdk.ts";

/** What the adapter uses, by the module that exports it: nothing else is re-exported. */
const USED: Record<string, string[]> = {
  [SDK]: [
    "CanUseTool",
    "Options",
    "PermissionMode",
    "Query",
    "SDKAssistantMessage",
    "SDKMessage",
    "SDKPartialAssistantMessage",
    "SDKResultMessage",
    "SDKTaskNotificationMessage",
    "SDKUserMessage",
    "SessionMessage",
  ],
  [`${SDK}/sdk-tools`]: [
    "AgentInput",
    "AskUserQuestionInput",
    "BashInput",
    "FileEditInput",
    "FileReadInput",
    "FileWriteInput",
    "NotebookEditInput",
    "TodoWriteInput",
  ],
};

/** The declaration files, by package-relative name, and the module specifiers whose types each declares. */
const DECLARATIONS: Array<{ pkg: string; file: string; declares?: string }> = [
  { pkg: SDK, file: "sdk.d.ts", declares: SDK },
  { pkg: SDK, file: "sdk-tools.d.ts", declares: `${SDK}/sdk-tools` },
  { pkg: API, file: "resources/beta/messages/messages.d.mts" },
  { pkg: API, file: "resources/messages/messages.d.mts" },
];

export interface Manifest {
  sdk: string;
  version: string;
  generator: string;
  peers: Record<string, string>;
  declarations: Record<string, string>;
  files: Record<string, string>;
}

const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");

function packageDir(pkg: string): string {
  // The SDK's package.json is not among its exports: its directory is that of its main module.
  const sdkDir = dirname(createRequire(import.meta.url).resolve(SDK));
  return pkg === SDK ? sdkDir : join(dirname(sdkDir), pkg.split("/")[1]!);
}

const versionOf = (pkg: string): string =>
  (JSON.parse(readFileSync(join(packageDir(pkg), "package.json"), "utf8")) as { version: string }).version;

/** The bindings the installed SDK gives: the module's text and the manifest describing it. */
export async function generate(): Promise<{ module: string; manifest: Manifest }> {
  const declarations: Record<string, string> = {};
  for (const { pkg, file, declares } of DECLARATIONS) {
    const text = readFileSync(join(packageDir(pkg), file));
    declarations[`${pkg}/${file}`] = sha256(text);
    for (const name of declares ? USED[declares]! : []) {
      const exported = new RegExp(`^export (declare )?(type|interface|class|function|const) ${name}\\b`, "m");
      if (!exported.test(text.toString("utf8"))) throw new Error(`${pkg}/${file} exports no ${name}`);
    }
  }
  const version = versionOf(SDK);
  const source = [
    `// Generated from ${SDK} ${version} by scripts/claude-protocol.ts: do not edit.`,
    "// The Agent SDK types the Claude adapter is typed against, and no other.",
    ...Object.entries(USED).map(([from, names]) => `export type { ${names.join(", ")} } from "${from}";`),
    "",
  ].join("\n");
  const module = await format(source, { ...(await resolveConfig(join(PROTOCOL, MODULE))), parser: "typescript" });
  const manifest: Manifest = {
    sdk: SDK,
    version,
    generator: "scripts/claude-protocol.ts",
    peers: { [API]: versionOf(API) },
    declarations,
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
  const committed = JSON.parse(readFileSync(join(protocol, "MANIFEST.json"), "utf8")) as Manifest;
  const problems: string[] = [];
  if (committed.version !== manifest.version)
    problems.push(`MANIFEST.json says ${SDK} ${committed.version}, the installed SDK is ${manifest.version}`);
  for (const [file, hash] of Object.entries(manifest.declarations))
    if (committed.declarations[file] !== hash) problems.push(`${file} differs from the one MANIFEST.json records`);
  if (readFileSync(join(protocol, MODULE), "utf8") !== module) problems.push(`protocol/${MODULE} does not reproduce`);
  if (problems.length === 0 && readFileSync(join(protocol, "MANIFEST.json"), "utf8") !== manifestText(manifest))
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
    console.error(`${problems.join("\n")}\nregenerate with: npm run protocol:claude -- --write`);
    process.exitCode = 1;
  } else console.log(`${SDK}: protocol/${MODULE} and MANIFEST.json reproduce from the installed declarations`);
}

if (process.argv[1] && import.meta.filename === process.argv[1]) await main();
