/**
 * The runtime-owned bare repository behind the checkpoint store, and how every git call
 * against it is set up: GIT_DIR is the private store, GIT_INDEX_FILE a private index (one per
 * cwd), core.excludesFile a private ignore file, and the user's config, hooks and GIT_*
 * environment are kept out, so the user's own `.git` is never read or written by accident.
 */
import { createHash } from "node:crypto";
import { readdir, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { ClosedError } from "../../domain/errors.js";
import { GitProcesses, type GitResult } from "./gitProcess.js";
import { makePrivate, privateDirectory, writePrivate } from "./storeFiles.js";

/** The well-known id of git's empty tree (sha1 object format, which `open` creates). */
export const EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
const IDENTITY = { name: "Tiller", email: "tiller@localhost" };
/** What locates the user's config when we read core.excludesFile the way their git would. */
const USER_CONFIG_VARIABLES = ["GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"];

export interface GitCall {
  /** The thread's directory: the work tree, and what picks the private index and ignore file. */
  cwd?: string;
  /** A work tree other than cwd (matching ignore rules from the user's work-tree top). */
  workTree?: string;
  /** Index file; defaults to cwd's private index. */
  index?: string;
  /** core.excludesFile; defaults to cwd's ignore file (or an empty file without cwd). */
  excludesFile?: string;
  input?: string;
  okCodes?: number[];
  privateUmask?: boolean;
}

export class PrivateRepository {
  /** The store's own files (private indexes, ignore files, locks), inside the repository. */
  readonly own: string;
  readonly processes = new GitProcesses();
  private readonly emptyFile: string;
  private readonly baseEnv: NodeJS.ProcessEnv;
  private readonly config: string[];

  private constructor(
    readonly dir: string,
    readonly userEnv: NodeJS.ProcessEnv,
  ) {
    this.own = join(dir, "tiller");
    this.emptyFile = join(this.own, "empty");
    this.baseEnv = {
      ...withoutGit(userEnv),
      GIT_DIR: dir,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: this.emptyFile,
      GIT_AUTHOR_NAME: IDENTITY.name,
      GIT_AUTHOR_EMAIL: IDENTITY.email,
      GIT_COMMITTER_NAME: IDENTITY.name,
      GIT_COMMITTER_EMAIL: IDENTITY.email,
      GIT_TERMINAL_PROMPT: "0",
    };
    this.config = [
      "core.autocrlf=false",
      "core.safecrlf=false",
      "core.quotePath=false",
      "core.fsmonitor=false",
      "commit.gpgSign=false",
      "gc.auto=0",
      // Objects 0400, everything else 0600, directories 0700, whatever the umask.
      "core.sharedRepository=0600",
      `core.hooksPath=${join(this.own, "no-hooks")}`,
    ].flatMap((setting) => ["-c", setting]);
  }

  /** Opens (creating if needed) the private bare repository at the absolute path `dir`. */
  static async open(dir: string, userEnv: NodeJS.ProcessEnv): Promise<PrivateRepository> {
    const repo = new PrivateRepository(dir, userEnv);
    // A store written before it was private has group/other bits: it gets tightened once.
    const shared = await stat(repo.dir).then(
      (info) => (info.mode & 0o077) !== 0,
      () => false,
    );
    await privateDirectory(repo.dir);
    // Re-running init on an existing repository is a no-op that keeps its objects and refs.
    await repo.git(["init", "--bare", "--quiet", "--template=", "--shared=0600", repo.dir]);
    if (shared) await makePrivate(repo.dir);
    await privateDirectory(repo.own);
    await privateDirectory(join(repo.dir, "info"));
    await writePrivate(repo.emptyFile, "");
    // info/attributes outranks every .gitattributes, so the user's eol/filter rules cannot
    // rewrite bytes on the way in or out: a restore must reproduce files exactly.
    await writePrivate(join(repo.dir, "info", "attributes"), "* -text -eol -filter -ident -working-tree-encoding\n");
    // Index locks left by a crashed git: the data-dir lock makes this process the only writer,
    // and a git of the previous runtime died with it (gitProcess.ts).
    for (const name of await readdir(repo.own)) {
      if (name.endsWith(".lock")) await unlink(join(repo.own, name)).catch(() => undefined);
    }
    return repo;
  }

  /** `core.excludesFile` as the user's git reads it (repository, global, system config); null when unset. */
  async excludesFileSetting(gitDir: string | null): Promise<string | null> {
    const env: NodeJS.ProcessEnv = { ...withoutGit(this.userEnv), GIT_DIR: gitDir ?? this.dir };
    for (const name of USER_CONFIG_VARIABLES) if (this.userEnv[name] !== undefined) env[name] = this.userEnv[name];
    try {
      const { stdout, code } = await this.processes.run({
        config: [],
        args: ["config", "--get", "--path", "core.excludesFile"],
        env,
        cwd: this.dir,
        okCodes: [1],
      });
      return code === 0 && stdout.trim() !== "" ? stdout.trim() : null;
    } catch (error) {
      if (error instanceof ClosedError) throw error;
      return null; // a config the user's git cannot read either: git's default file applies
    }
  }

  indexFor(cwd: string): string {
    return this.ownFile("index", cwd);
  }

  /** A private file per directory (`<kind>-<hash of the path>`). */
  ownFile(kind: string, dir: string): string {
    const key = createHash("sha256").update(dir).digest("hex").slice(0, 24);
    return join(this.own, `${kind}-${key}`);
  }

  git(args: string[], call: GitCall = {}): Promise<GitResult> {
    const env: NodeJS.ProcessEnv = { ...this.baseEnv };
    const workTree = call.workTree ?? call.cwd;
    if (workTree !== undefined) {
      env.GIT_WORK_TREE = workTree;
      env.GIT_INDEX_FILE = call.index ?? this.indexFor(workTree);
    }
    const excludesFile =
      call.excludesFile ?? (call.cwd !== undefined ? this.ownFile("ignored", call.cwd) : this.emptyFile);
    const config = [...this.config, "-c", `core.excludesFile=${excludesFile}`];
    const { input, okCodes, privateUmask } = call;
    return this.processes.run({ config, args, env, cwd: workTree ?? this.dir, input, okCodes, privateUmask });
  }
}

/** The environment minus anything GIT_* (a hook's GIT_DIR would redirect every call). */
function withoutGit(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(env)) {
    if (!key.toUpperCase().startsWith("GIT_")) out[key] = value;
  }
  return out;
}

/** The records of git's `-z` output. */
export const splitZ = (text: string) => text.split("\0").filter((part) => part !== "");
