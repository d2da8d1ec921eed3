/**
 * Generated blocks inside hand-written Markdown. A block sits between two markers:
 *
 *   <!-- BEGIN GENERATED name (npm run docs) -->
 *   ...what the generator wrote...
 *   <!-- END GENERATED name -->
 *
 * The prose around a block is edited by hand; the block itself only by `npm run docs`, and
 * the docs tests fail while a block differs from what its generator would write now.
 */

export function beginMarker(name: string): string {
  return `<!-- BEGIN GENERATED ${name} (npm run docs) -->`;
}

export function endMarker(name: string): string {
  return `<!-- END GENERATED ${name} -->`;
}

/** The block's current content (between its markers, without the newlines that frame it). */
export function readBlock(markdown: string, name: string, file = "the file"): string {
  const { start, end } = locate(markdown, name, file);
  return markdown.slice(start, end).replace(/^\n/, "").replace(/\n$/, "");
}

/** The Markdown with the block's content replaced. */
export function writeBlock(markdown: string, name: string, content: string, file = "the file"): string {
  const { start, end } = locate(markdown, name, file);
  return `${markdown.slice(0, start)}\n${content}\n${markdown.slice(end)}`;
}

/** Where the block's content lies: from the end of its BEGIN marker to the start of its END marker. */
function locate(markdown: string, name: string, file: string): { start: number; end: number } {
  const begin = beginMarker(name);
  const at = markdown.indexOf(begin);
  const end = markdown.indexOf(endMarker(name));
  if (at < 0 || end < 0 || end < at) {
    throw new Error(`${file} has no generated block "${name}": it needs the lines\n${begin}\n${endMarker(name)}`);
  }
  return { start: at + begin.length, end };
}
