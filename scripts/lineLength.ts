/**
 * `npm run format:check` runs this after Prettier: no line of the sources runs past 120
 * characters (Prettier wraps code, but never a comment or a string, so those are checked here).
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";

const MAX_LINE = 120;
const ROOTS = ["src", "test", "bench", "scripts", "examples", "inspector/server", "inspector/page", "bin"];

async function files(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const nested = await Promise.all(
    entries.map((e) => {
      const path = join(dir, e.name);
      if (e.isDirectory()) return files(path);
      return Promise.resolve(/\.(ts|js)$/.test(e.name) ? [path] : []);
    }),
  );
  return nested.flat();
}

const long: string[] = [];
for (const root of ROOTS) {
  for (const file of await files(root)) {
    const lines = (await readFile(file, "utf8")).split("\n");
    lines.forEach((line, i) => {
      if (line.length > MAX_LINE) long.push(`${file}:${i + 1}: ${line.length} characters`);
    });
  }
}
for (const line of long) process.stdout.write(`${line}\n`);
process.stdout.write(
  long.length === 0
    ? `lines: none past ${MAX_LINE} characters\n`
    : `lines: ${long.length} past ${MAX_LINE} characters\n`,
);
process.exitCode = long.length === 0 ? 0 : 1;
