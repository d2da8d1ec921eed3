/**
 * Codex protocol bindings. Two steps, both reproducible offline:
 *
 * 1. The snapshot: the pinned binary's own JSON schema of the app-server protocol, experimental
 *    methods and fields included (`codex app-server generate-json-schema --experimental`; the
 *    adapter uses the experimental API). One file is committed, the bundle that holds every type;
 *    MANIFEST.json records the binary version and the sha256 of every file the binary generates.
 * 2. The bindings: TypeScript types (`types.ts`) and the runtime schemas of the frames the adapter
 *    validates (`schemas.ts`), generated from the committed snapshot by this script (no binary
 *    needed), for what the adapter uses (USED) and every type those reference; their sha256 is in
 *    MANIFEST.json too.
 *
 * Default: checks that both reproduce byte for byte (exit 1 if not); `--write` rewrites them.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { format } from "prettier";

export const PROTOCOL = join(import.meta.dirname, "..", "src", "adapters", "codex", "protocol");
/** The snapshot the bindings are generated from (the full set is only hashed). */
export const SNAPSHOT = "codex_app_server_protocol.schemas.json";
export const BINDINGS = ["types.ts", "schemas.ts"] as const;
const GENERATOR = "codex app-server generate-json-schema --experimental";

/**
 * What the adapter uses of the protocol: the calls it sends (their params and results), the
 * notifications its mapper reads and the server requests it answers (validated at runtime).
 */
export const USED = {
  calls: [
    "initialize",
    "thread/start",
    "thread/resume",
    "thread/fork",
    "thread/read",
    "thread/revert",
    "thread/unsubscribe",
    "turn/start",
    "turn/steer",
    "turn/interrupt",
    "config/read",
  ],
  notifications: [
    "turn/started",
    "turn/completed",
    "turn/plan/updated",
    "item/started",
    "item/completed",
    "item/agentMessage/delta",
    "item/reasoning/summaryTextDelta",
    "item/commandExecution/outputDelta",
    "item/fileChange/outputDelta",
    "serverRequest/resolved",
    "error",
    "warning",
  ],
  serverRequests: [
    "item/commandExecution/requestApproval",
    "item/fileChange/requestApproval",
    "item/tool/requestUserInput",
    "item/tool/call",
  ],
} as const;

type Schema = { [key: string]: unknown } | boolean;
type Obj = { [key: string]: unknown };

const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}

/**
 * The installed @openai/codex package's native binary. Found here rather than through the adapter
 * (transport.ts), which imports the bindings: this script must run when they are missing or broken.
 */
function pinnedBinary(): string {
  const triples: Record<string, string> = {
    "linux-x64": "x86_64-unknown-linux-musl",
    "linux-arm64": "aarch64-unknown-linux-musl",
    "darwin-x64": "x86_64-apple-darwin",
    "darwin-arm64": "aarch64-apple-darwin",
  };
  const triple = triples[`${process.platform}-${process.arch}`];
  const pkg = `@openai/codex-${process.platform}-${process.arch}/package.json`;
  const binary = triple && join(createRequire(import.meta.url).resolve(pkg), "..", "vendor", triple, "bin", "codex");
  if (!binary || !existsSync(binary)) throw new Error("the pinned @openai/codex package is not installed (npm ci)");
  return binary;
}

/** Runs the pinned binary's schema generator into a scratch directory (removed by the caller). */
export function generate(): { version: string; dir: string; hashes: Record<string, string> } {
  const binary = pinnedBinary();
  const scratch = mkdtempSync(join(tmpdir(), "codex-protocol-"));
  // A temporary HOME and CODEX_HOME: generating never touches the user's Codex state.
  const env = { PATH: process.env.PATH ?? "", HOME: join(scratch, "home"), CODEX_HOME: join(scratch, "codex-home") };
  const version = execFileSync(binary, ["--version"], { env, encoding: "utf8" })
    .trim()
    .replace(/^codex-cli\s+/, "");
  const dir = join(scratch, "out");
  execFileSync(binary, ["app-server", "generate-json-schema", "--experimental", "--out", dir], {
    env,
    stdio: "ignore",
  });
  const files = walk(dir)
    .map((f) => relative(dir, f))
    .sort();
  const hashes = Object.fromEntries(files.map((f) => [f, sha256(readFileSync(join(dir, f)))]));
  return { version, dir, hashes };
}

// ---------------------------------------------------------------------------------------------
// Bindings from the snapshot

/** Every definition of the bundle in one namespace (`#/definitions/v2/X` and `#/definitions/X` are both `X`). */
function definitionsOf(snapshot: Obj): Map<string, Obj> {
  const { v2, ...top } = snapshot.definitions as { v2?: Record<string, Obj> } & Record<string, Obj>;
  const all = new Map<string, Obj>();
  const comparable = (s: unknown) =>
    JSON.stringify(s, (k, v) => (k === "description" || k === "title" || k === "$schema" ? undefined : v));
  for (const [name, schema] of [...Object.entries(v2 ?? {}), ...Object.entries(top)]) {
    const known = all.get(name);
    if (known && comparable(known) !== comparable(schema)) throw new Error(`two different definitions named ${name}`);
    if (!known) all.set(name, schema);
  }
  return all;
}

const refName = (ref: string) => ref.replace(/^#\/definitions\/(v2\/)?/, "");

/** The methods of a `oneOf` of `{ method, params }` envelopes (ClientRequest, ServerNotification, ServerRequest). */
function methodsOf(envelope: Obj): Array<{ method: string; params: string | null }> {
  return (envelope.oneOf as Obj[]).map((variant) => {
    const props = variant.properties as Record<string, Obj>;
    const params = props.params?.$ref;
    return {
      method: (props.method!.enum as string[])[0]!,
      params: typeof params === "string" ? refName(params) : null,
    };
  });
}

function referenced(schema: unknown, into: Set<string>): void {
  if (Array.isArray(schema)) for (const s of schema) referenced(s, into);
  else if (schema && typeof schema === "object") {
    for (const [key, value] of Object.entries(schema)) {
      if (key === "$ref" && typeof value === "string") into.add(refName(value));
      else if (key !== "enum" && key !== "default" && key !== "required") referenced(value, into);
    }
  }
}

/** `roots` and every definition they reference, sorted. */
function closure(defs: Map<string, Obj>, roots: string[]): string[] {
  const seen = new Set<string>();
  const queue = [...roots];
  while (queue.length > 0) {
    const name = queue.pop()!;
    if (seen.has(name)) continue;
    const schema = defs.get(name);
    if (!schema) throw new Error(`the snapshot has no definition ${name}`);
    seen.add(name);
    const refs = new Set<string>();
    referenced(schema, refs);
    queue.push(...refs);
  }
  return [...seen].sort();
}

function docComment(text: unknown, indent = ""): string {
  if (typeof text !== "string" || text.trim() === "") return "";
  const words = text.replace(/\*\//g, "* /").split(/\s+/).filter(Boolean);
  const lines: string[] = [];
  let line = "";
  for (const word of words) {
    if (line && line.length + word.length + 1 > 80) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}`).join("\n")}\n${indent} */\n`;
}

const literal = (value: unknown) => JSON.stringify(value);
const key = (name: string) => (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? name : JSON.stringify(name));
const group = (type: string) => (/[|&]/.test(type) ? `(${type})` : type);

function typeOf(schema: Schema): string {
  if (schema === true || (typeof schema === "object" && Object.keys(schema).length === 0)) return "unknown";
  if (schema === false) return "never";
  if (typeof schema.$ref === "string") return refName(schema.$ref);
  const parts: string[] = [];
  if (Array.isArray(schema.enum)) parts.push(schema.enum.map(literal).join(" | "));
  else if ("const" in schema) parts.push(literal(schema.const));
  else if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string];
    parts.push(types.map((t) => primitive(t, schema)).join(" | "));
  } else if (schema.properties) parts.push(primitive("object", schema));
  for (const word of ["oneOf", "anyOf"] as const) {
    const variants = schema[word];
    if (Array.isArray(variants)) parts.push(variants.map((v: Schema) => typeOf(v)).join(" | "));
  }
  if (Array.isArray(schema.allOf)) parts.push(...schema.allOf.map((s: Schema) => typeOf(s)));
  if (parts.length === 0) return "unknown";
  return parts.length === 1 ? parts[0]! : parts.map(group).join(" & ");
}

function primitive(type: string, schema: Obj): string {
  switch (type) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "array": {
      const items = schema.items as Schema | Schema[] | undefined;
      if (Array.isArray(items)) return `[${items.map(typeOf).join(", ")}]`;
      return `Array<${items === undefined ? "unknown" : typeOf(items)}>`;
    }
    case "object":
      return objectType(schema);
    default:
      throw new Error(`unknown JSON schema type ${type}`);
  }
}

function objectType(schema: Obj): string {
  const properties = (schema.properties ?? {}) as Record<string, Schema>;
  const required = new Set((schema.required ?? []) as string[]);
  const extra = schema.additionalProperties as Schema | undefined;
  const names = Object.keys(properties).sort();
  const members = names.map((name) => {
    const property = properties[name]!;
    const doc = typeof property === "object" ? docComment(property.description) : "";
    return `${doc}${key(name)}${required.has(name) ? "" : "?"}: ${typeOf(property)};`;
  });
  const object = `{\n${members.join("\n")}\n}`;
  if (extra === undefined || extra === true || extra === false) {
    if (names.length > 0) return object;
    return extra === false ? "Record<string, never>" : "{ [key: string]: unknown }";
  }
  const index = `{ [key: string]: ${typeOf(extra)} }`;
  return names.length > 0 ? `${object} & ${index}` : index;
}

/** A definition for the runtime check: references made local to the subset, prose dropped. */
function runtimeSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(runtimeSchema);
  if (!schema || typeof schema !== "object") return schema;
  const out: Obj = {};
  for (const [k, value] of Object.entries(schema)) {
    if (k === "description" || k === "title" || k === "$schema") continue;
    if (k === "$ref" && typeof value === "string") out[k] = `#/definitions/${refName(value)}`;
    else if (k === "enum" || k === "default" || k === "required" || k === "const") out[k] = value;
    else if (k === "properties") {
      out[k] = Object.fromEntries(Object.entries(value as Obj).map(([name, s]) => [name, runtimeSchema(s)]));
    } else out[k] = runtimeSchema(value);
  }
  return out;
}

const HEADER = (what: string) =>
  `// GENERATED by scripts/codex-protocol.ts from ${SNAPSHOT} (codex %VERSION%): do not edit.\n` +
  `// ${what}\n// Regenerate: \`npm run protocol:codex -- --write\`.\n`;

/** The two binding files, from the committed snapshot: deterministic (sorted, formatted by the pinned Prettier). */
export async function renderBindings(snapshotText: string, version: string): Promise<Record<string, string>> {
  const snapshot = JSON.parse(snapshotText) as Obj;
  const defs = definitionsOf(snapshot);
  const method = (envelope: string, name: string) => {
    const found = methodsOf(defs.get(envelope)!).find((m) => m.method === name);
    if (!found?.params) throw new Error(`${envelope} has no ${name} with params`);
    return found.params;
  };
  const responseOf = (params: string) => {
    const response = params.replace(/(Params|Request)$/, "Response");
    if (!defs.has(response)) throw new Error(`the snapshot has no ${response} (for ${params})`);
    return response;
  };
  const calls = USED.calls.map((m) => ({ method: m, params: method("ClientRequest", m) }));
  const notes = USED.notifications.map((m) => ({ method: m, params: method("ServerNotification", m) }));
  const asks = USED.serverRequests.map((m) => ({ method: m, params: method("ServerRequest", m) }));
  const typeRoots = [
    ...calls.flatMap((c) => [c.params, responseOf(c.params)]),
    ...notes.map((n) => n.params),
    ...asks.flatMap((a) => [a.params, responseOf(a.params)]),
  ];
  const typeNames = closure(defs, typeRoots);
  const allNotifications = methodsOf(defs.get("ServerNotification")!).map((m) => m.method);
  const entry = (m: { method: string; params: string }, withResult: boolean) =>
    withResult
      ? `${literal(m.method)}: { params: ${m.params}; result: ${responseOf(m.params)} };`
      : `${literal(m.method)}: ${m.params};`;
  const types = [
    HEADER("The app-server types the Codex adapter uses and every type they reference."),
    ...typeNames.map((name) => {
      const schema = defs.get(name)!;
      return `${docComment(schema.description)}export type ${name} = ${typeOf(schema)};\n`;
    }),
    "/** The calls the adapter sends: their params and results. */",
    `export interface CodexCalls {\n${calls.map((c) => entry(c, true)).join("\n")}\n}\n`,
    "/** The notifications the adapter reads, by method: their params. */",
    `export interface CodexNotifications {\n${notes.map((n) => entry(n, false)).join("\n")}\n}\n`,
    "/** The server requests the adapter answers: their params and the answer. */",
    `export interface CodexServerRequests {\n${asks.map((a) => entry(a, true)).join("\n")}\n}\n`,
    "/** Every notification the app-server may send (others are a newer binary's). */",
    `export const CODEX_SERVER_NOTIFICATIONS = ${literal(allNotifications)} as const;\n`,
  ].join("\n");
  const validated = [...notes, ...asks];
  const schemaNames = closure(
    defs,
    validated.map((v) => v.params),
  );
  const paramsByMethod = Object.fromEntries(validated.map((v) => [v.method, v.params]));
  const schemas = [
    HEADER("JSON schemas (draft-07) of the frames the Codex adapter validates, and what they reference."),
    "/** The params definition of each validated notification and server request. */",
    `export const CODEX_VALIDATED_PARAMS = ${literal(paramsByMethod)} as const;\n`,
    "/** The definitions they reference (`#/definitions/<name>`), descriptions dropped. */",
    `export const CODEX_DEFINITIONS: { readonly [name: string]: object } = ${literal(
      Object.fromEntries(schemaNames.map((name) => [name, runtimeSchema(defs.get(name))])),
    )};\n`,
  ].join("\n");
  const formatOptions = { parser: "typescript", printWidth: 120 } as const;
  return {
    "types.ts": await format(types.replace("%VERSION%", version), formatOptions),
    "schemas.ts": await format(schemas.replace("%VERSION%", version), formatOptions),
  };
}

/** The committed bindings and what the committed snapshot generates (the test compares them). */
export async function bindingsCheck(): Promise<{
  committed: Record<string, string>;
  generated: Record<string, string>;
}> {
  const manifest = JSON.parse(readFileSync(join(PROTOCOL, "MANIFEST.json"), "utf8")) as { version: string };
  const generated = await renderBindings(readFileSync(join(PROTOCOL, SNAPSHOT), "utf8"), manifest.version);
  const committed = Object.fromEntries(
    BINDINGS.map((f) => [f, existsSync(join(PROTOCOL, f)) ? readFileSync(join(PROTOCOL, f), "utf8") : ""]),
  );
  return { committed, generated };
}

async function main(): Promise<void> {
  const write = process.argv.includes("--write");
  const { version, dir, hashes } = generate();
  try {
    const snapshot = readFileSync(join(dir, SNAPSHOT), "utf8");
    const bindings = await renderBindings(snapshot, version);
    const manifest = {
      binary: "@openai/codex",
      version,
      generator: GENERATOR,
      committed: [SNAPSHOT],
      bindings: {
        generator: "scripts/codex-protocol.ts",
        from: SNAPSHOT,
        files: Object.fromEntries(BINDINGS.map((f) => [f, sha256(bindings[f]!)])),
      },
      files: hashes,
    };
    if (write) {
      writeFileSync(join(PROTOCOL, SNAPSHOT), snapshot);
      for (const file of BINDINGS) writeFileSync(join(PROTOCOL, file), bindings[file]!);
      writeFileSync(join(PROTOCOL, "MANIFEST.json"), `${JSON.stringify(manifest, null, 2)}\n`);
      console.log(`wrote ${SNAPSHOT}, ${BINDINGS.join(", ")} and MANIFEST.json for codex ${version}`);
      return;
    }
    const problems: string[] = [];
    const committedManifest = JSON.parse(readFileSync(join(PROTOCOL, "MANIFEST.json"), "utf8")) as typeof manifest;
    if (JSON.stringify(committedManifest) !== JSON.stringify(manifest))
      problems.push("MANIFEST.json differs from what the installed binary and this script generate");
    const ours = join(PROTOCOL, SNAPSHOT);
    if (!existsSync(ours) || sha256(readFileSync(ours)) !== hashes[SNAPSHOT])
      problems.push(`${SNAPSHOT} does not reproduce`);
    const { committed, generated } = await bindingsCheck();
    for (const file of BINDINGS) if (committed[file] !== generated[file]) problems.push(`${file} does not reproduce`);
    if (problems.length > 0) {
      console.error(`${problems.join("\n")}\n(regenerate: npm run protocol:codex -- --write)`);
      process.exitCode = 1;
    } else {
      console.log(
        `codex ${version}: ${Object.keys(hashes).length} generated files match MANIFEST.json; ` +
          `${SNAPSHOT} and the bindings (${BINDINGS.join(", ")}) reproduce`,
      );
    }
  } finally {
    rmSync(join(dir, ".."), { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.filename === process.argv[1]) await main();
