import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A temporary HOME (with XDG_CONFIG_HOME under it) and no system config, so the checkpoint
 * store reads a git config the test wrote, never this machine's (and never writes either).
 */
export async function isolatedHome(): Promise<{ home: string; env: NodeJS.ProcessEnv; cleanup: () => Promise<void> }> {
  const home = await mkdtemp(join(tmpdir(), "tiller-home-"));
  await mkdir(join(home, ".config"), { recursive: true });
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith("GIT_")) env[key] = value;
  Object.assign(env, { HOME: home, XDG_CONFIG_HOME: join(home, ".config"), GIT_CONFIG_NOSYSTEM: "1" });
  return { home, env, cleanup: () => rm(home, { recursive: true, force: true }) };
}

/** Points this process's HOME and XDG_CONFIG_HOME at the isolated ones until the returned function restores them. */
export function useHome(env: NodeJS.ProcessEnv): () => void {
  return useEnv({ HOME: env.HOME, XDG_CONFIG_HOME: env.XDG_CONFIG_HOME, GIT_CONFIG_NOSYSTEM: env.GIT_CONFIG_NOSYSTEM });
}

/** Sets these variables in this process's environment until the returned function restores them. */
export function useEnv(vars: Record<string, string | undefined>): () => void {
  const saved = Object.keys(vars).map((name) => [name, process.env[name]] as const);
  for (const [name, value] of Object.entries(vars)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  return () => {
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
}
