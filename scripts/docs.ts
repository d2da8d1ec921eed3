import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { readBlock, writeBlock } from "./docsBlocks.js";
import { degradationsBlock } from "./docsDegradations.js";
import { eventsBlock } from "./docsEvents.js";
import { defaultRecordBlock, providerDifferencesBlock, providerGapsBlock } from "./docsProviders.js";

/**
 * Writes every generated block of the README and docs/ (`npm run docs`), or with `--check`
 * lists the blocks that differ from what their generators write now and exits 1. The docs
 * tests run the same comparison.
 */

const root = join(import.meta.dirname, "..");

export interface Block {
  file: string;
  name: string;
  render: () => string | Promise<string>;
}

/** A file shown verbatim in a fenced block (the README's example is the file the tests run). */
const verbatim = (path: string, language: string) => async () =>
  `\`\`\`${language}\n${await readFile(join(root, path), "utf8")}\`\`\``;

export const BLOCKS: Block[] = [
  { file: "README.md", name: "example examples/embedding.ts", render: verbatim("examples/embedding.ts", "ts") },
  { file: "docs/events.md", name: "events", render: eventsBlock },
  { file: "docs/degradations.md", name: "degradations", render: degradationsBlock },
  { file: "README.md", name: "capability table", render: providerDifferencesBlock },
  { file: "docs/providers.md", name: "capability gaps", render: providerGapsBlock },
  { file: "docs/providers.md", name: "default record", render: defaultRecordBlock },
];

export interface BlockState {
  block: Block;
  current: string;
  expected: string;
}

export async function blockStates(): Promise<BlockState[]> {
  const states: BlockState[] = [];
  for (const block of BLOCKS) {
    const markdown = await readFile(join(root, block.file), "utf8");
    states.push({ block, current: readBlock(markdown, block.name, block.file), expected: await block.render() });
  }
  return states;
}

async function main(check: boolean): Promise<void> {
  const stale = (await blockStates()).filter((s) => s.current !== s.expected);
  if (check) {
    for (const { block } of stale) console.error(`${block.file}: block "${block.name}" is stale (npm run docs)`);
    if (stale.length > 0) process.exitCode = 1;
    return;
  }
  for (const { block, expected } of stale) {
    const path = join(root, block.file);
    await writeFile(path, writeBlock(await readFile(path, "utf8"), block.name, expected, block.file));
    console.log(`${block.file}: wrote block "${block.name}"`);
  }
  if (stale.length === 0) console.log("docs: every generated block is up to date");
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) await main(process.argv.includes("--check"));
