import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { GitCheckpointStore } from "../../src/runtime/checkpoints/gitStore.js";
import { gitIn, snapshotFiles } from "../support/files.js";
import { withCheckpointStore, type StoreFixture } from "./isolated.js";

/**
 * Every source the user's git takes ignore rules from applies to checkpoints: `.gitignore`
 * files at every level (above the thread's directory too), the repository's `info/exclude`,
 * and `core.excludesFile` (repository or global config, or git's default XDG file). Ignored
 * files are neither captured nor touched by a restore. The user's config is read from a
 * temporary HOME, and is never written.
 */

let root: string;
let store: GitCheckpointStore;
let home: StoreFixture["home"];
withCheckpointStore("tiller-ignore-", (f) => ({ root, store, home } = f));

async function put(dir: string, files: Record<string, string>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
}

async function userRepo(name = "repo"): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir, { recursive: true });
  await gitIn(dir, "init", "-q");
  return dir;
}

const paths = (files: Array<{ path: string }>) => files.map((f) => f.path);
let refs = 0;
const capture = (cwd: string, parent: string | null = null) =>
  store.capture({ cwd, ref: `thr_i/chk_${++refs}`, parent, message: "m" });

/**
 * Capture with the ignored files present, then edit the first tracked file, change every
 * ignored file, add ignored files (`late`) and restore: only tracked files come back; every
 * ignored file keeps what it has now.
 */
async function expectIgnored(
  cwd: string,
  tracked: Record<string, string>,
  ignored: Record<string, string>,
  late: string[],
): Promise<void> {
  await put(cwd, { ...tracked, ...ignored });
  const one = await capture(cwd);
  expect(paths(one.files)).toEqual(Object.keys(tracked).sort());
  const edited = Object.keys(tracked)[0]!;
  const changed = Object.fromEntries(Object.keys(ignored).map((path) => [path, "changed later\n"]));
  await put(cwd, {
    ...changed,
    ...Object.fromEntries(late.map((path) => [path, "late\n"])),
    "new.txt": "new\n",
    [edited]: "edited\n",
  });
  const two = await capture(cwd, one.commit);
  expect(paths(two.files)).toEqual([edited, "new.txt"].sort());

  const restored = await store.restore({ cwd, commit: one.commit });
  expect(paths(restored.files)).toEqual([edited, "new.txt"].sort());
  for (const [path, content] of Object.entries(tracked)) expect(await readFile(join(cwd, path), "utf8")).toBe(content);
  for (const path of Object.keys(ignored)) expect(await readFile(join(cwd, path), "utf8")).toBe("changed later\n");
  for (const path of late) expect(await readFile(join(cwd, path), "utf8")).toBe("late\n");
}

describe("checkpoint ignore sources", () => {
  it("the repository's info/exclude", async () => {
    const repo = await userRepo();
    await put(repo, { ".git/info/exclude": "*.env\ncache/\n" });
    await expectIgnored(
      repo,
      { "a.txt": "a\n", "src/b.txt": "b\n" },
      { "local.env": "SECRET=1\n", "cache/blob.bin": "x\n", "src/deep.env": "y\n" },
      ["late.env", "cache/late.bin", "new/dir/late.env"],
    );
  });

  it("a linked worktree's info/exclude (in the common dir)", async () => {
    const repo = await userRepo();
    await put(repo, { "seed.txt": "seed\n", ".git/info/exclude": "*.env\n" });
    await gitIn(
      repo,
      "-c",
      "user.name=U",
      "-c",
      "user.email=u@example.com",
      "-c",
      "commit.gpgSign=false",
      "commit",
      "-q",
      "--allow-empty",
      "-m",
      "init",
    );
    const linked = join(root, "linked");
    await gitIn(repo, "worktree", "add", "-q", linked);
    await expectIgnored(linked, { "a.txt": "a\n" }, { "local.env": "SECRET=1\n" }, ["late.env"]);
  });

  it("the global core.excludesFile named in ~/.gitconfig", async () => {
    await put(home.home, { ".gitconfig": "[core]\n\texcludesFile = ~/global-ignore\n", "global-ignore": "*.bak\n" });
    const cwd = join(root, "plain");
    await expectIgnored(cwd, { "a.txt": "a\n" }, { "notes.bak": "old\n", "dir/x.bak": "x\n" }, ["late.bak"]);
  });

  it("git's default global ignore file, $XDG_CONFIG_HOME/git/ignore", async () => {
    await put(home.home, { ".config/git/ignore": "*.swp\n.idea/\n" });
    const repo = await userRepo();
    await expectIgnored(repo, { "a.txt": "a\n" }, { "a.txt.swp": "swap\n", ".idea/workspace.xml": "<x/>\n" }, [
      ".new.txt.swp",
      ".idea/late.xml",
    ]);
  });

  it("a core.excludesFile in the repository's own config", async () => {
    const repo = await userRepo();
    await put(root, { "repo-ignore": "*.tmp\n" });
    await gitIn(repo, "config", "core.excludesFile", join(root, "repo-ignore"));
    await expectIgnored(repo, { "a.txt": "a\n" }, { "scratch.tmp": "t\n" }, ["late.tmp"]);
  });

  it("the .gitignore files above a thread directory inside a repository, and its own", async () => {
    const repo = await userRepo();
    await put(repo, {
      ".gitignore": "node_modules/\n*.log\n/pkg/app/build/\n",
      "pkg/.gitignore": "dist/\n",
      ".git/info/exclude": "/pkg/app/local.env\n",
    });
    const cwd = join(repo, "pkg", "app");
    await put(cwd, { ".gitignore": "!keep.log\n" });
    await expectIgnored(
      cwd,
      { "src/main.ts": "main\n", ".gitignore": "!keep.log\n", "keep.log": "kept\n" },
      {
        "node_modules/x/index.js": "x\n",
        "a.log": "log\n",
        "dist/out.js": "out\n",
        "build/b.o": "o\n",
        "local.env": "e\n",
      },
      ["late.log", "node_modules/y/late.js", "dist/late.js"],
    );
  });

  it("a thread directory that its enclosing repository ignores is checkpointed on its own rules", async () => {
    await put(home.home, { ".config/git/ignore": "*.bak\n" });
    const repo = await userRepo();
    await put(repo, { ".gitignore": "sandbox/\n" });
    const cwd = join(repo, "sandbox", "work");
    await expectIgnored(cwd, { "a.txt": "a\n", "b/c.txt": "c\n" }, { "old.bak": "b\n" }, ["late.bak"]);
  });

  it("paths with wildcard characters and spaces are matched literally", async () => {
    const repo = await userRepo();
    await put(repo, { ".git/info/exclude": "d\\[x\\]/\na\\*b\ntrail\\ \n" });
    await expectIgnored(
      repo,
      { "dx/f.txt": "f\n", aXb: "axb\n", trail: "no space\n", "sp ace.txt": "s\n" },
      { "d[x]/f.txt": "ignored\n", "a*b": "star\n", "trail ": "trailing space\n" },
      ["d[x]/late.txt"],
    );
  });

  it("a file the checkpoint holds but that is ignored now is not brought back", async () => {
    const repo = await userRepo();
    await put(repo, { "a.txt": "a\n", "config.env": "captured before it was ignored\n" });
    const one = await capture(repo);
    expect(paths(one.files)).toEqual(["a.txt", "config.env"]);
    await put(repo, { ".git/info/exclude": "*.env\n", "a.txt": "edited\n" });
    await rm(join(repo, "config.env"));
    const restored = await store.restore({ cwd: repo, commit: one.commit });
    expect(paths(restored.files)).toEqual(["a.txt"]);
    expect(await snapshotFiles(repo, [".git"])).toEqual({ "a.txt": "a\n" });
  });

  it("reads the user's global config without writing it", async () => {
    const gitconfig = "[core]\n\texcludesFile = ~/global-ignore\n";
    await put(home.home, { ".gitconfig": gitconfig, "global-ignore": "*.bak\n" });
    const before = await snapshotFiles(home.home);
    const cwd = join(root, "plain");
    await put(cwd, { "a.txt": "a\n" });
    const one = await capture(cwd);
    await store.restore({ cwd, commit: one.commit });
    expect(await snapshotFiles(home.home)).toEqual(before);
  });
});
