import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";
import { GitCheckpointStore } from "../../src/runtime/checkpoints/gitStore.js";

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

/** For a whole test file: this process's HOME is an isolated one (never the user's), given back after. */
export function isolateHomeForFile(): void {
  let home: Awaited<ReturnType<typeof isolatedHome>>;
  let restoreHome: () => void;
  beforeAll(async () => {
    home = await isolatedHome();
    restoreHome = useHome(home.env);
  });
  afterAll(async () => {
    restoreHome();
    await home.cleanup();
  });
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

export interface StoreFixture {
  /** The test's temporary directory. */
  root: string;
  /** `root/work`, created empty: the workspace checkpoints capture. */
  cwd: string;
  store: GitCheckpointStore;
  home: Awaited<ReturnType<typeof isolatedHome>>;
}

/**
 * A fresh checkpoint store for each test (under `root/data`), with an isolated HOME and an empty
 * workspace; `use` receives it before each test, and everything is removed after.
 */
export function withCheckpointStore(prefix: string, use: (fixture: StoreFixture) => void): void {
  let fixture: StoreFixture | undefined;
  beforeEach(async () => {
    const root = await mkdtemp(join(tmpdir(), prefix));
    const cwd = join(root, "work");
    await mkdir(cwd);
    const home = await isolatedHome();
    const store = await GitCheckpointStore.open(join(root, "data", "checkpoints.git"), { env: home.env });
    fixture = { root, cwd, store, home };
    use(fixture);
  });
  afterEach(async () => {
    if (!fixture) return;
    await fixture.store.close();
    await rm(fixture.root, { recursive: true, force: true });
    await fixture.home.cleanup();
    fixture = undefined;
  });
}
