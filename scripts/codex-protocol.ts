/**
 * Codex protocol snapshots: regenerates the app-server JSON schemas from the pinned binary
 * (`codex app-server generate-json-schema`) and checks that the committed snapshots in
 * src/adapters/codex/protocol/ reproduce byte for byte (default), or rewrites them (`--write`).
 * MANIFEST.json records the binary version and the sha256 of every generated file.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  copyFileSync,
  existsSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { installedCodexBinary } from "../src/adapters/codex/config.js";

const PROTOCOL = join(import.meta.dirname, "..", "src", "adapters", "codex", "protocol");
/** The snapshots the adapter and its tests read (the full set is only hashed). */
const COMMITTED = [
  "codex_app_server_protocol.v2.schemas.json",
  "ClientRequest.json",
  "ServerRequest.json",
  "ServerNotification.json",
];

const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}

export function generate(): { version: string; dir: string; hashes: Record<string, string> } {
  const binary = installedCodexBinary();
  if (!binary) throw new Error("the pinned @openai/codex package is not installed (npm ci)");
  const scratch = mkdtempSync(join(tmpdir(), "codex-protocol-"));
  // A temporary HOME and CODEX_HOME: generating never touches the user's Codex state.
  const env = { PATH: process.env.PATH ?? "", HOME: join(scratch, "home"), CODEX_HOME: join(scratch, "codex-home") };
  const version = execFileSync(binary, ["--version"], { env, encoding: "utf8" })
    .trim()
    .replace(/^codex-cli\s+/, "");
  const dir = join(scratch, "out");
  execFileSync(binary, ["app-server", "generate-json-schema", "--out", dir], { env, stdio: "ignore" });
  const files = walk(dir)
    .map((f) => relative(dir, f))
    .sort();
  const hashes = Object.fromEntries(files.map((f) => [f, sha256(join(dir, f))]));
  return { version, dir, hashes };
}

function main(): void {
  const write = process.argv.includes("--write");
  const { version, dir, hashes } = generate();
  const manifest = {
    binary: "@openai/codex",
    version,
    generator: "codex app-server generate-json-schema",
    committed: COMMITTED,
    files: hashes,
  };
  try {
    if (write) {
      for (const file of COMMITTED) copyFileSync(join(dir, file), join(PROTOCOL, file));
      writeFileSync(join(PROTOCOL, "MANIFEST.json"), `${JSON.stringify(manifest, null, 2)}\n`);
      console.log(`wrote ${COMMITTED.length} snapshots and MANIFEST.json for codex ${version}`);
      return;
    }
    const problems: string[] = [];
    const committedManifest = JSON.parse(readFileSync(join(PROTOCOL, "MANIFEST.json"), "utf8")) as typeof manifest;
    if (committedManifest.version !== version)
      problems.push(`MANIFEST says codex ${committedManifest.version}, the installed binary is ${version}`);
    if (JSON.stringify(committedManifest.files) !== JSON.stringify(hashes))
      problems.push("the generated file set or hashes differ from MANIFEST.json");
    for (const file of COMMITTED) {
      const ours = join(PROTOCOL, file);
      if (!existsSync(ours) || sha256(ours) !== hashes[file]) problems.push(`${file} does not reproduce`);
    }
    if (problems.length > 0) {
      console.error(problems.join("\n"));
      process.exitCode = 1;
    } else {
      console.log(
        `codex ${version}: ${Object.keys(hashes).length} generated files match MANIFEST.json; ` +
          `${COMMITTED.length} committed snapshots reproduce`,
      );
    }
  } finally {
    rmSync(join(dir, ".."), { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.filename === process.argv[1]) main();
