import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * What the README and docs/ point at exists: relative links (with their #anchors), repository
 * paths named in code spans (globs allowed), `npm run` scripts, and every error code the
 * runtime can throw is listed in docs/api.md.
 */

const root = join(import.meta.dirname, "../..");
const DOCS = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];
/** Folders whose paths the docs name in code spans. */
const REPO_PATH = /^(?:src|test|scripts|bench|examples|inspector|bin|docs|\.ci)\/[\w./*-]*$/;
/** Named in the docs, written by the tests, ignored by git (absent from a clean clone). */
const WRITTEN_BY_TESTS = ["test/inspector/artifacts/"];

const read = (file: string) => readFileSync(join(root, file), "utf8");

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function anchors(markdown: string): Set<string> {
  const withoutCode = markdown.replace(/```[\s\S]*?```/g, "");
  const slugs = [...withoutCode.matchAll(/^#{1,6} (.+)$/gm)].map((m) =>
    m[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_ -]/gu, "")
      .replace(/ /g, "-"),
  );
  return new Set(slugs);
}

/** Files matching a path that may hold `*` in its last segments. */
function matches(path: string): boolean {
  if (!path.includes("*")) return existsSync(join(root, path));
  const dir = dirname(path);
  if (dir.includes("*") || !existsSync(join(root, dir))) return false;
  const pattern = new RegExp(
    `^${path
      .slice(dir.length + 1)
      .replace(/[.+?^${}()|[\]\\]/g, "\\$&")
      .replace(/\*/g, ".*")}$`,
  );
  return readdirSync(join(root, dir)).some((name) => pattern.test(name));
}

describe("README and docs references", () => {
  it("links to files and headings that exist", () => {
    const broken: string[] = [];
    for (const file of DOCS) {
      const text = read(file).replace(/```[\s\S]*?```/g, "");
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const [path, anchor] = target!.split("#") as [string, string | undefined];
        const resolved = path === "" ? file : relative(root, join(root, dirname(file), path));
        if (!existsSync(join(root, resolved))) {
          broken.push(`${file}: ${target} (no ${resolved})`);
          continue;
        }
        if (anchor && resolved.endsWith(".md") && !anchors(read(resolved)).has(anchor))
          broken.push(`${file}: ${target} (no heading #${anchor} in ${resolved})`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("names repository paths that exist", () => {
    const missing: string[] = [];
    for (const file of DOCS) {
      for (const [, span] of read(file).matchAll(/`([^`\n]+)`/g)) {
        if (!REPO_PATH.test(span!) || WRITTEN_BY_TESTS.some((p) => span!.startsWith(p))) continue;
        if (!matches(span!.replace(/\/$/, ""))) missing.push(`${file}: ${span}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("names npm scripts that exist", () => {
    const scripts = Object.keys((JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts);
    const unknown: string[] = [];
    for (const file of DOCS) {
      for (const [, script] of read(file).matchAll(/npm run ([\w:-]+)/g))
        if (!scripts.includes(script!)) unknown.push(`${file}: npm run ${script}`);
    }
    expect(unknown).toEqual([]);
  });

  it("imports the package by its published name (`tiller` on npm is someone else's)", () => {
    const examples = readdirSync(join(root, "examples")).map((f) => `examples/${f}`);
    const wrong = [...DOCS, ...examples].filter((file) => /from "tiller(\/[a-z]+)?"/.test(read(file)));
    expect(wrong).toEqual([]);
  });

  it("documents every member of the public TillerRuntime in docs/api.md", () => {
    const body = /export interface TillerRuntime \{([\s\S]*?)\n\}/.exec(read("src/runtime/api.ts"))?.[1] ?? "";
    const members = [...body.matchAll(/^\s+(?:readonly\s+)?(\w+)[(:?]/gm)].map((m) => m[1]!);
    expect(members).toEqual(expect.arrayContaining(["sendMessage", "subscribe", "head"]));
    const api = read("docs/api.md");
    expect(members.filter((member) => !api.includes(`\`${member}`))).toEqual([]);
  });

  it("lists every error code in docs/api.md", () => {
    const union = /export type TillerErrorCode =([^;]+);/.exec(read("src/domain/errors.ts"))?.[1] ?? "";
    const codes = [...union.matchAll(/"([a-z_]+)"/g)].map((m) => m[1]!);
    expect(codes.length).toBeGreaterThan(10);
    const api = read("docs/api.md");
    expect(codes.filter((code) => !api.includes(`\`${code}\``))).toEqual([]);
  });
});
