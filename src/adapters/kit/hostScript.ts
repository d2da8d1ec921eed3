import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * How to run a host written in TypeScript next to its adapter: the built `.js` with plain
 * node when the package is built, else the `.ts` source through tsx (tests and development).
 */
export function nodeHostScript(relativeJs: string, base: string): { script: string; execArgs: string[] } {
  const built = fileURLToPath(new URL(relativeJs, base));
  if (existsSync(built)) return { script: built, execArgs: [] };
  return { script: fileURLToPath(new URL(relativeJs.replace(/\.js$/, ".ts"), base)), execArgs: ["--import", "tsx"] };
}
