import { describe, expect, it } from "vitest";
import { randomIds } from "../../src/domain/ids.js";

describe("randomIds", () => {
  it("makes ids of the prefix, a time part and 12 random hex digits, never twice, past many pool refills", () => {
    let clock = 1_700_000_000_000;
    const ids = randomIds(() => clock);
    const seen = new Set<string>();
    for (let i = 0; i < 5_000; i++) {
      if (i % 1_000 === 0) clock += 1;
      const id = ids.next("run");
      expect(id).toMatch(/^run_[0-9a-z]{9}[0-9a-f]{12}$/);
      seen.add(id);
    }
    expect(seen.size).toBe(5_000);
  });

  it("orders ids by time before their random part", () => {
    let clock = 1_700_000_000_000;
    const ids = randomIds(() => clock);
    const earlier = ids.next("thr");
    clock += 1;
    expect(ids.next("thr") > earlier).toBe(true);
  });
});
