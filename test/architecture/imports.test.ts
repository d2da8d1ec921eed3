import { describe, expect, it } from "vitest";
import { cycles, importGraph, importViolations } from "../support/imports.js";

/** `npm run imports` as a test: no import cycle in src/, and each layer imports only from below. */
describe("the import graph of src/", () => {
  it("has no cycle and respects the layers", async () => {
    expect(await importViolations()).toEqual([]);
  });

  it("the cycle finder finds a cycle (so an empty answer means something)", async () => {
    const graph = await importGraph();
    expect(graph.size).toBeGreaterThan(50);
    expect(
      cycles(
        new Map([
          ["a", ["b"]],
          ["b", ["c"]],
          ["c", ["a"]],
          ["d", ["a"]],
        ]),
      ),
    ).toEqual([["a", "b", "c"]]);
    expect(cycles(new Map([["a", ["a"]]]))).toEqual([["a"]]);
  });
});
