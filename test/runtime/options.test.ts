import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createRuntime,
  createScriptedAdapter,
  keyedScript,
  TillerError,
  type RuntimeOptions,
} from "../../src/index.js";
import { openTestRuntime, rejection } from "../support/runtime.js";

/** `createRuntime`'s options are input like any other: a typo fails closed, naming the field. */
describe("runtime options", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "tiller-options-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const providers = () => ({ scripted: createScriptedAdapter() });
  const bad: Array<[string, () => Partial<RuntimeOptions> & Record<string, unknown>]> = [
    ["sandbox", () => ({ sandbox: "readonly" as never })],
    ["checkpoints", () => ({ checkpoints: "yes" as never })],
    ["sessionIdleMs", () => ({ sessionIdleMs: -5 })],
    ["sessionIdleMs", () => ({ sessionIdleMs: Number.NaN })],
    ["ids", () => ({ ids: 5 as never })],
    ["now", () => ({ now: 5 as never })],
    ["groupCommitMs", () => ({ groupCommitMs: -1 })],
    ["allowSessionStopInterrupt", () => ({ allowSessionStopInterrupt: "no" as never })],
    ["inspect", () => ({ inspect: "yes" as never })],
    ["inspect.port", () => ({ inspect: { port: 70_000 } })],
    ["onFailure", () => ({ onFailure: "stderr" as never })],
    ["sandBox", () => ({ sandBox: "read-only" })],
    ["providers", () => ({ providers: {} })],
    ["providers.bad id", () => ({ providers: { "bad id": createScriptedAdapter() } })],
    ["providers.x.sendRun", () => ({ providers: { x: { ...createScriptedAdapter(), sendRun: undefined } as never } })],
  ];

  for (const [field, options] of bad) {
    it(`refuses a bad ${field} with invalid_input, before touching the data directory`, async () => {
      const dataDir = join(dir, `never-${field.replace(/\W/g, "_")}`);
      const error = await rejection(createRuntime({ dataDir, providers: providers(), ...options() } as RuntimeOptions));
      expect(error).toBeInstanceOf(TillerError);
      expect(error).toMatchObject({ code: "invalid_input", details: { field } });
      await expect(import("node:fs/promises").then((fs) => fs.stat(dataDir))).rejects.toMatchObject({ code: "ENOENT" });
    });
  }

  it("refuses a dataDir that is a file with invalid_input", async () => {
    const file = join(dir, "a-file");
    await writeFile(file, "not a directory");
    await expect(createRuntime({ dataDir: file, providers: providers() })).rejects.toMatchObject({
      code: "invalid_input",
      details: { field: "dataDir" },
    });
  });

  it("refuses a thread cwd that does not exist or is a file, and records nothing", async () => {
    const { rt, cleanup } = await openTestRuntime(providers());
    try {
      const head = rt.views.head;
      await expect(rt.createThread({ providerTarget: "scripted", cwd: join(dir, "missing") })).rejects.toMatchObject({
        code: "invalid_input",
        details: { field: "cwd" },
      });
      const file = join(dir, "cwd-file");
      await writeFile(file, "x");
      await expect(rt.createThread({ providerTarget: "scripted", cwd: file })).rejects.toMatchObject({
        code: "invalid_input",
        details: { field: "cwd" },
      });
      expect(rt.views.head).toBe(head);
      expect(rt.listThreads()).toHaveLength(0);
    } finally {
      await cleanup();
    }
  });

  it("a read-only sandbox is honoured: the scripted provider writes nothing without asking", async () => {
    const script = keyedScript({ "[write]": [{ type: "file_change", path: "out.txt", diff: "+hi", content: "hi" }] });
    const cwd = await mkdtemp(join(dir, "ws-"));
    const { rt, cleanup } = await openTestRuntime(
      { scripted: createScriptedAdapter({ script }) },
      { sandbox: "read-only" },
    );
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted", cwd });
      const { runId } = await rt.sendMessage({ threadId, text: "[write] it" });
      await rt.waitForRun(runId);
      await expect(import("node:fs/promises").then((fs) => fs.stat(join(cwd, "out.txt")))).rejects.toMatchObject({
        code: "ENOENT",
      });
    } finally {
      await cleanup();
    }
  });
});
