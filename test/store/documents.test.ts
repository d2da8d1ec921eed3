import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { InvalidInputError, StoreCorruptError } from "../../src/domain/errors.js";
import { openStateDocument } from "../../src/runtime/store/documents.js";

const Settings = z.object({
  schemaVersion: z.literal(1),
  name: z.string(),
  limits: z.object({ maxRuns: z.number().int().positive() }),
  tags: z.array(z.string()),
});
type Settings = z.infer<typeof Settings>;
const defaults = (): Settings => ({ schemaVersion: 1, name: "default", limits: { maxRuns: 4 }, tags: [] });

let dir: string;
let file: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "tiller-docs-"));
  file = join(dir, "state", "settings.json");
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("openStateDocument", () => {
  it("creates the file with defaults when missing", async () => {
    const doc = await openStateDocument(file, Settings, defaults);
    expect(doc.data).toEqual(defaults());
    expect(JSON.parse(await readFile(file, "utf8"))).toEqual(defaults());
  });

  it("persists updates across reopen", async () => {
    const doc = await openStateDocument(file, Settings, defaults);
    await doc.update((draft) => {
      draft.name = "renamed";
      draft.tags.push("a");
    });
    expect(doc.data.name).toBe("renamed");
    const again = await openStateDocument(file, Settings, defaults);
    expect(again.data).toEqual({ ...defaults(), name: "renamed", tags: ["a"] });
  });

  it("applies concurrent updates one at a time, in order", async () => {
    const doc = await openStateDocument(file, Settings, defaults);
    await Promise.all(Array.from({ length: 10 }, (_, i) => doc.update((d) => void d.tags.push(String(i)))));
    expect(doc.data.tags).toEqual(["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]);
    const again = await openStateDocument(file, Settings, defaults);
    expect(again.data.tags).toHaveLength(10);
  });

  it("rejects an update that breaks the schema and keeps the old state", async () => {
    const doc = await openStateDocument(file, Settings, defaults);
    const error = await doc.update((d) => void (d.limits.maxRuns = -1)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidInputError);
    expect(error).toMatchObject({ field: "limits.maxRuns" });
    expect(doc.data.limits.maxRuns).toBe(4);
    expect(JSON.parse(await readFile(file, "utf8"))).toEqual(defaults());
    await doc.update((d) => void (d.limits.maxRuns = 8)); // the queue still works
    expect(doc.data.limits.maxRuns).toBe(8);
  });

  it("exposes frozen data so changes must go through update", async () => {
    const doc = await openStateDocument(file, Settings, defaults);
    expect(() => {
      (doc.data.limits as { maxRuns: number }).maxRuns = 9;
    }).toThrow(TypeError);
  });

  it("throws StoreCorruptError naming the field of an invalid document", async () => {
    await openStateDocument(file, Settings, defaults);
    await writeFile(file, JSON.stringify({ ...defaults(), limits: { maxRuns: "many" } }));
    const error = await openStateDocument(file, Settings, defaults).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreCorruptError);
    expect(error).toMatchObject({ code: "store_corrupt", details: { file, field: "limits.maxRuns" } });
    expect((error as Error).message).toContain("limits.maxRuns");
    expect((error as Error).message).toContain(file);
  });

  it("throws StoreCorruptError for a file that is not JSON or is JSON null", async () => {
    await openStateDocument(file, Settings, defaults);
    await writeFile(file, "{ not json");
    await expect(openStateDocument(file, Settings, defaults)).rejects.toBeInstanceOf(StoreCorruptError);
    await writeFile(file, "null");
    await expect(openStateDocument(file, Settings, defaults)).rejects.toBeInstanceOf(StoreCorruptError);
    expect(await readFile(file, "utf8")).toBe("null"); // never silently replaced with defaults
  });
});
