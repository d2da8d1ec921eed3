import { Session } from "node:inspector/promises";

/** One node of a V8 CPU profile (what `Profiler.stop` returns). */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

export interface ProfileLine {
  /** Function name and where it is (file:line, relative to the repository). */
  fn: string;
  /** Share of the samples spent in the function itself. */
  self: number;
}

/**
 * Runs `work` under the V8 sampling profiler (in process, through the inspector) and returns the
 * functions with the most self time: what `npm run bench -- --profile` prints.
 */
export async function profile(work: () => Promise<unknown>, top = 25): Promise<ProfileLine[]> {
  const session = new Session();
  session.connect();
  try {
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 100 });
    await session.post("Profiler.start");
    await work();
    const { profile } = (await session.post("Profiler.stop")) as { profile: { nodes: ProfileNode[] } };
    return summarize(profile.nodes, top);
  } finally {
    session.disconnect();
  }
}

const root = new URL("..", import.meta.url).href;

function summarize(nodes: readonly ProfileNode[], top: number): ProfileLine[] {
  const self = new Map<string, number>();
  let total = 0;
  for (const node of nodes) {
    const hits = node.hitCount ?? 0;
    total += hits;
    const { functionName, url, lineNumber } = node.callFrame;
    const where = url ? `${url.replace(root, "").replace(/^file:\/\//, "")}:${lineNumber + 1}` : "";
    const key = `${functionName || "(anonymous)"} ${where}`.trim();
    self.set(key, (self.get(key) ?? 0) + hits);
  }
  return [...self]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([fn, hits]) => ({ fn, self: total > 0 ? hits / total : 0 }));
}
