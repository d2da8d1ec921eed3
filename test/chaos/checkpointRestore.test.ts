import { execFile } from "node:child_process";
import { chmod, lstat, mkdir, mkdtemp, readFile, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { GitCheckpointStore } from "../../src/runtime/checkpoints/gitStore.js";
import { isolatedHome } from "../checkpoints/isolated.js";
import { tallyChaos } from "./tally.js";

const exec = promisify(execFile);

/**
 * Checkpoint capture and restore against the user's own git as the oracle. Random ignore
 * rules (wildcards, negations, anchored and directory patterns, escaped specials) spread over
 * every source git reads (the root and a nested .gitignore, info/exclude, the global excludes
 * file), random files with awkward names and modes, a thread directory at the repository's
 * top or in a subdirectory, random edits, chmods, deletions and creations after the capture.
 * After the restore: every file `git check-ignore` calls ignored, and every file outside the
 * thread's directory, is exactly as it was before the restore; every other file is exactly as
 * it was captured (content and permission bits), or absent if it was.
 */

const NAMES = [
  "plain.txt",
  "x.log",
  "keep.log",
  "build/o.txt",
  "build/keep.txt",
  "top.txt",
  "a b.txt",
  "a*b",
  "d[1]/f",
  "d1/f",
  "sp ace",
  "trail ",
  "deep/q.tmp",
  "z/deep/r.tmp",
  "abc",
  "#hash",
  "!bang",
  "back\\slash",
  ".env",
  "n/.env.local",
  "sub/plain.txt",
  "sub/x.log",
  "sub/top.txt",
  "sub/build/y",
  "sub/keep.log",
  "sub/d[1]/g",
  "sub/a b.txt",
  "sub/deep/s.tmp",
  "sub/.env",
  "sub/q/abc",
];
const RULES = [
  "*.log",
  "!keep.log",
  "build/",
  "/top.txt",
  "a*",
  "d\\[1\\]/",
  "sp\\ ace",
  "trail\\ ",
  "**/deep/*.tmp",
  "\\#hash",
  "\\!bang",
  "back\\\\slash",
  ".env*",
  "abc",
  "/sub/top.txt",
];
const MODES = [0o600, 0o640, 0o644, 0o700, 0o750, 0o755];
const SOURCES = ["root", "sub", "info", "global"] as const;

type State = { content: string; mode: number } | null;
type Edit =
  { kind: "keep" } | { kind: "write"; content: string } | { kind: "chmod"; mode: number } | { kind: "delete" };

const fileArb = fc.record({ content: fc.string({ maxLength: 12 }), mode: fc.constantFrom(...MODES) });
const editArb: fc.Arbitrary<Edit> = fc.oneof(
  fc.constant({ kind: "keep" as const }),
  fc.string({ maxLength: 12 }).map((content) => ({ kind: "write" as const, content })),
  fc.constantFrom(...MODES).map((mode) => ({ kind: "chmod" as const, mode })),
  fc.constant({ kind: "delete" as const }),
);
const caseArb = fc.record({
  rules: fc.record(
    Object.fromEntries(SOURCES.map((s) => [s, fc.subarray(RULES)])) as Record<
      (typeof SOURCES)[number],
      fc.Arbitrary<string[]>
    >,
  ),
  inSub: fc.boolean(),
  initial: fc.dictionary(fc.constantFrom(...NAMES), fileArb, { minKeys: 1 }),
  edits: fc.dictionary(fc.constantFrom(...NAMES), editArb),
  created: fc.dictionary(fc.constantFrom(...NAMES), fileArb),
});

async function stateOf(path: string): Promise<State> {
  const info = await lstat(path).catch(() => undefined);
  return info?.isFile() ? { content: await readFile(path, "latin1"), mode: info.mode & 0o7777 } : null;
}

async function put(path: string, content: string, mode: number): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, content);
  await chmod(path, mode);
}

const RUNS = Number(process.env.TILLER_CHAOS_RESTORE_RUNS ?? 25);

describe("chaos: checkpoint restore against git's own ignore rules", () => {
  it(`restores exactly what git does not ignore, and nothing else (${RUNS} generated cases)`, async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(caseArb, async ({ rules, inSub, initial, edits, created }) => {
        runs++;
        const root = await mkdtemp(join(tmpdir(), "tiller-chaos-restore-"));
        const home = await isolatedHome();
        const repo = join(root, "repo");
        const store = await GitCheckpointStore.open(join(root, "data", "checkpoints.git"), { env: home.env });
        try {
          const userGit = (args: string[], input?: string) => {
            const child = exec("git", ["-C", repo, ...args], { env: home.env });
            if (input !== undefined) child.child.stdin!.end(input);
            return child;
          };
          await mkdir(join(repo, "sub"), { recursive: true });
          await userGit(["init", "-q"]);
          await writeFile(join(home.home, ".gitconfig"), "[core]\n\texcludesFile = ~/global-ignore\n");
          await writeFile(join(home.home, "global-ignore"), rules.global.join("\n") + "\n");
          await writeFile(join(repo, ".gitignore"), rules.root.join("\n") + "\n");
          await writeFile(join(repo, "sub", ".gitignore"), rules.sub.join("\n") + "\n");
          await writeFile(join(repo, ".git", "info", "exclude"), rules.info.join("\n") + "\n");
          for (const [name, file] of Object.entries(initial)) await put(join(repo, name), file.content, file.mode);

          const cwd = inSub ? join(repo, "sub") : repo;
          const inside = (name: string) => !inSub || name.startsWith("sub/");
          const atCapture = new Map<string, State>();
          for (const name of NAMES) atCapture.set(name, await stateOf(join(repo, name)));
          const ignoredNow = async () => {
            // Exit code 1: none of the paths is ignored.
            const { stdout } = await userGit(
              ["check-ignore", "--no-index", "-z", "--stdin"],
              NAMES.map((n) => `${n}\0`).join(""),
            ).catch((error: { code?: number; stdout?: string }) => {
              if (error.code === 1) return { stdout: "" };
              throw error;
            });
            return new Set(stdout.split("\0").filter(Boolean));
          };
          const ignoredAtCapture = await ignoredNow();
          const capture = await store.capture({ cwd, ref: "thr_c/chk_1", parent: null, message: "capture" });
          const prefix = inSub ? "sub/" : "";
          const captured = capture.files.map((f) => prefix + f.path);
          expect(captured.filter((name) => ignoredAtCapture.has(name))).toEqual([]);

          for (const [name, edit] of Object.entries(edits)) {
            const path = join(repo, name);
            if (!(await stateOf(path))) continue;
            if (edit.kind === "write") await writeFile(path, edit.content);
            else if (edit.kind === "chmod") await chmod(path, edit.mode);
            else if (edit.kind === "delete") await unlink(path);
          }
          for (const [name, file] of Object.entries(created)) {
            if (!(await stateOf(join(repo, name)))) await put(join(repo, name), file.content, file.mode);
          }
          const beforeRestore = new Map<string, State>();
          for (const name of NAMES) beforeRestore.set(name, await stateOf(join(repo, name)));
          const ignored = await ignoredNow();

          await store.restore({ cwd, commit: capture.commit });
          const wrong: string[] = [];
          for (const name of NAMES) {
            const expected = !inside(name) || ignored.has(name) ? beforeRestore.get(name) : atCapture.get(name);
            const actual = await stateOf(join(repo, name));
            if (JSON.stringify(actual) !== JSON.stringify(expected))
              wrong.push(`${name}: ${JSON.stringify(actual)} instead of ${JSON.stringify(expected)}`);
          }
          expect(wrong).toEqual([]);
        } finally {
          await store.close();
          await rm(root, { recursive: true, force: true });
          await home.cleanup();
        }
      }),
      { numRuns: RUNS },
    );
    tallyChaos("checkpoint restore against git's ignore rules", { properties: 1, runs });
  }, 300_000);
});
