import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const exec = promisify(execFile);

/** The user's git in `dir`, isolated from this machine's global config and from any GIT_* in the env. */
export async function gitIn(dir: string, ...args: string[]): Promise<string> {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("GIT_")) env[key] = value;
  }
  env.GIT_CONFIG_NOSYSTEM = "1";
  env.GIT_CONFIG_GLOBAL = "/dev/null";
  const { stdout } = await exec("git", args, { cwd: dir, env });
  return stdout;
}

/** Every file under `dir` (path -> content, byte-exact as latin1), skipping the top-level names in `skip`. */
export async function snapshotFiles(dir: string, skip: string[] = []): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (at: string, prefix: string): Promise<void> => {
    for (const entry of await readdir(at, { withFileTypes: true })) {
      const path = prefix + entry.name;
      if (skip.includes(path)) continue;
      if (entry.isDirectory()) await walk(join(at, entry.name), `${path}/`);
      else out[path] = await readFile(join(at, entry.name), "latin1");
    }
  };
  await walk(dir, "");
  return out;
}

/** A fresh temporary directory and its removal. */
export async function tempDir(prefix: string): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}
