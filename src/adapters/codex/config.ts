import { existsSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { delimiter, join } from "node:path";
import { HostUnavailableError } from "../../domain/errors.js";

/**
 * Where the Codex binary comes from (the option, then `codex` on PATH, then the installed
 * `@openai/codex` package's native binary), and a provider home for offline use against the
 * model simulator. With a real account nothing here is used: Codex reads its own home.
 */

export function resolveCodexBinary(explicit?: string): string {
  if (explicit) return explicit;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const candidate = join(dir, "codex");
    if (dir && existsSync(candidate)) return candidate;
  }
  const installed = installedCodexBinary();
  if (installed) return installed;
  throw new HostUnavailableError("no codex binary: pass `binary`, put `codex` on PATH, or install @openai/codex");
}

/** The native binary shipped by the installed `@openai/codex` package (spawned directly: no Node shim in between). */
export function installedCodexBinary(): string | null {
  const arch = process.arch === "x64" ? "x86_64" : process.arch === "arm64" ? "aarch64" : null;
  const os =
    process.platform === "linux" ? "unknown-linux-musl" : process.platform === "darwin" ? "apple-darwin" : null;
  if (!arch || !os) return null;
  try {
    const require = createRequire(import.meta.url);
    const pkg = require.resolve(`@openai/codex-${process.platform}-${process.arch}/package.json`);
    const binary = join(pkg, "..", "vendor", `${arch}-${os}`, "bin", "codex");
    return existsSync(binary) ? binary : null;
  } catch {
    return null;
  }
}

/**
 * Writes `config.toml` into a provider home that points Codex at a Responses endpoint
 * (the model simulator) with no network beyond it: no plugin sync, no analytics, no retries.
 */
export async function writeSimulatorCodexHome(
  codexHome: string,
  baseUrl: string,
  options: { model?: string } = {},
): Promise<void> {
  await mkdir(codexHome, { recursive: true });
  const toml = `model = "${options.model ?? "gpt-5.5"}"
model_provider = "simulator"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[features]
plugins = false
apps = false
remote_plugin = false

[analytics]
enabled = false

[model_providers.simulator]
name = "Tiller model simulator"
base_url = "${baseUrl}/v1"
env_key = "SIMULATOR_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`;
  await writeFile(join(codexHome, "config.toml"), toml);
}
