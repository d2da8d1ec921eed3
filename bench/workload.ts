import type { ScriptSource, ScriptStep } from "../src/index.js";

/**
 * The benchmark workload: every turn streams many small deltas (reasoning, a long
 * assistant message, tool and command output, a closing message). It depends only on the
 * turn index, so the runtime and the raw-frame capture see exactly the same frames.
 */
export interface Workload {
  turns: number;
  /** Characters of the long assistant message per turn. */
  textChars: number;
  /** Characters per streamed text delta. */
  chunkSize: number;
}

const filler = (n: number, seed: number): string => {
  const words = ["alpha ", "beta ", "gamma ", "delta ", "epsilon ", "zeta ", "eta ", "theta "];
  let out = "";
  for (let i = seed; out.length < n; i++) out += words[i % words.length];
  return out.slice(0, n);
};

export function workloadScript(w: Workload): ScriptSource {
  return ({ turnIndex }) => {
    const steps: ScriptStep[] = [
      { type: "reasoning", text: filler(600, turnIndex) },
      { type: "text", text: filler(w.textChars, turnIndex), chunkSize: w.chunkSize },
      {
        type: "tool",
        name: "read_file",
        input: { path: `src/file${turnIndex}.ts` },
        output: filler(1200, turnIndex + 1),
      },
      { type: "command", command: "npm test", output: filler(2400, turnIndex + 2), exitCode: 0 },
      { type: "text", text: filler(Math.floor(w.textChars / 4), turnIndex + 3), chunkSize: w.chunkSize },
    ];
    return steps;
  };
}

export const turnText = (i: number): string => `benchmark turn ${i}`;
