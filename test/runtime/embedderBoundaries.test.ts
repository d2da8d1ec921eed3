import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuntime, createScriptedAdapter, type IdSource, type RuntimeOptions } from "../../src/index.js";
import { openTestRuntime, rejection } from "../support/runtime.js";

/**
 * What the embedder hands the runtime at its boundaries (the id source, the clock, the data directory, the inspector's
 * port, listeners, inputs that throw as they are read) fails with a typed error naming what was wrong: never a raw
 * TypeError or RangeError, never an event loop that does not come back, never a record that cannot be read again.
 */

/** A proxy that throws whenever it is read: an input no call can read. */
const unreadable = () =>
  new Proxy(
    {},
    {
      get: () => {
        throw new Error("getter threw");
      },
      has: () => {
        throw new Error("has threw");
      },
      ownKeys: () => {
        throw new Error("ownKeys threw");
      },
      getOwnPropertyDescriptor: () => {
        throw new Error("descriptor threw");
      },
    },
  );

const codeAndField = (error: unknown) => {
  const e = error as { code?: string; field?: string; name?: string };
  return { name: e?.name, code: e?.code, field: e?.field };
};

describe("embedder boundaries", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "tiller-boundaries-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  let n = 0;
  const open = (options: Partial<RuntimeOptions>) =>
    createRuntime({ dataDir: join(dir, `d${++n}`), providers: { scripted: createScriptedAdapter() }, ...options });

  it("an id source that keeps giving an id in use is invalid_input (ids), and the runtime goes on", async () => {
    let calls = 0;
    const stuck: IdSource = {
      next(prefix) {
        // Bounded here so that a runtime which keeps asking fails this test instead of hanging it.
        if (++calls > 10_000) throw new Error("asked 10000 times for an id");
        return `${prefix}_same`;
      },
    };
    const { rt, cleanup } = await openTestRuntime({ scripted: createScriptedAdapter() }, { ids: stuck });
    try {
      const first = await rt.createThread({ providerTarget: "scripted" });
      expect(first.threadId).toBe("thr_same");
      const head = rt.head;
      const error = await rejection(rt.createThread({ providerTarget: "scripted" }));
      expect(codeAndField(error)).toEqual({ name: "InvalidInputError", code: "invalid_input", field: "ids" });
      expect(calls).toBeLessThan(10);
      expect(rt.head).toBe(head);
      // The runtime is not wedged: what was made before is there, and reads go on.
      expect((await rt.listThreads()).map((t) => t.threadId)).toEqual(["thr_same"]);
    } finally {
      await cleanup();
    }
  });

  it("an id source that skips the ids in use still finds a free one, however many there are", async () => {
    const dataDir = join(dir, "restarting");
    const { sequentialIds } = await import("../../src/index.js");
    const first = await open({ dataDir, ids: sequentialIds() });
    for (let i = 0; i < 30; i++) await first.createThread({ providerTarget: "scripted" });
    await first.close();
    // A deterministic source restarts at 1 every life: the 30 ids in use are skipped, not refused.
    const again = await open({ dataDir, ids: sequentialIds() });
    try {
      expect((await again.createThread({ providerTarget: "scripted" })).threadId).toBe("thr_31");
    } finally {
      await again.close();
    }
  });

  it.each([
    ["a number", 5],
    ["another entity's id", "run_1"],
    ["an id with a path in it", "thr_../x"],
    ["an empty tail", "thr_"],
    ["null", null],
  ])("an id source giving %s is invalid_input (ids), and nothing is written", async (_what, id) => {
    const ids: IdSource = { next: (prefix) => (prefix === "thr" ? (id as string) : `${prefix}_${++n}`) };
    const rt = await open({ ids });
    try {
      const head = rt.head;
      const error = await rejection(rt.createThread({ providerTarget: "scripted" }));
      expect(codeAndField(error)).toEqual({ name: "InvalidInputError", code: "invalid_input", field: "ids" });
      expect(rt.head).toBe(head);
      expect(rt.listThreads()).toEqual([]);
    } finally {
      await rt.close();
    }
  });

  it.each([
    ["an invalid Date", () => new Date(Number.NaN)],
    ["a number", () => 1_700_000_000_000 as unknown as Date],
    ["a string", () => "2026-01-01T00:00:00Z" as unknown as Date],
  ])("a clock returning %s is invalid_input (now)", async (_what, now) => {
    const error = await rejection(open({ now }));
    expect(codeAndField(error)).toEqual({ name: "InvalidInputError", code: "invalid_input", field: "now" });
  });

  it("a clock that goes bad while the runtime runs fails the call that read it with invalid_input (now)", async () => {
    let broken = false;
    const rt = await open({ now: () => (broken ? new Date(Number.NaN) : new Date(1_700_000_000_000)) });
    try {
      broken = true;
      const error = await rejection(rt.createThread({ providerTarget: "scripted" }));
      expect(codeAndField(error)).toEqual({ name: "InvalidInputError", code: "invalid_input", field: "now" });
    } finally {
      await rt.close();
    }
  });

  it("a data directory the runtime cannot make its own (/proc/self) is invalid_input (dataDir)", async () => {
    const error = await rejection(open({ dataDir: "/proc/self" }));
    expect(codeAndField(error)).toEqual({ name: "InvalidInputError", code: "invalid_input", field: "dataDir" });
  });

  describe("an inspector port in use", () => {
    let server: Server;
    let port: number;
    beforeAll(async () => {
      server = createServer();
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      port = (server.address() as { port: number }).port;
    });
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it("is inspector_unavailable (not store_failed), and the directory opens again without it", async () => {
      const dataDir = join(dir, "inspector");
      const error = await rejection(open({ dataDir, inspect: { port, onListening: () => undefined } }));
      expect(codeAndField(error)).toMatchObject({ name: "InspectorUnavailableError", code: "inspector_unavailable" });
      expect((error as { details: object }).details).toEqual({ port, errno: "EADDRINUSE" });
      const rt = await open({ dataDir });
      await rt.close();
    });
  });

  it("subscribe refuses a listener that is not a function (invalid_input, listener)", async () => {
    const rt = await open({});
    try {
      const error = await rejection(Promise.resolve().then(() => rt.subscribe({ afterSeq: 0 }, 5 as never)));
      expect(codeAndField(error)).toEqual({ name: "InvalidInputError", code: "invalid_input", field: "listener" });
    } finally {
      await rt.close();
    }
  });

  it("an input whose getters throw is invalid_input, for options, adapters and every call", async () => {
    const rejected = async (call: () => unknown) => codeAndField(await rejection(Promise.resolve().then(call)));
    const invalid = { name: "InvalidInputError", code: "invalid_input" };
    expect(await rejected(() => createRuntime(unreadable() as never))).toMatchObject(invalid);
    expect(
      await rejected(() => createRuntime({ dataDir: join(dir, "proxy"), providers: { s: unreadable() as never } })),
    ).toMatchObject(invalid);
    const rt = await open({});
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      for (const call of [
        () => rt.createThread(unreadable() as never),
        () => rt.sendMessage(unreadable() as never),
        () => rt.interrupt(unreadable() as never),
        () => rt.respond(unreadable() as never),
        () => rt.forkThread(unreadable() as never),
        () => rt.rollback(unreadable() as never),
        () => rt.subscribe(unreadable() as never, () => undefined),
        () => rt.sendMessage({ threadId, text: "x", runtimeMode: unreadable() as never }),
      ])
        expect(await rejected(call)).toMatchObject(invalid);
    } finally {
      await rt.close();
    }
  });
});
