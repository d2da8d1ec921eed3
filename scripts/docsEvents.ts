import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { z } from "zod";
import { DomainEventSchema } from "../src/domain/events.js";
import { EVENT_NOTES } from "./docsEventNotes.js";

/**
 * docs/events.md, generated: every domain event a subscriber can receive, with its fields read
 * from the zod schemas (through `z.toJSONSchema`) and the prose of docsEventNotes.ts. Schemas
 * exported elsewhere under a `...Schema` name (a failure, a changed file, the capability
 * record) keep that name and are described once, under "Shapes".
 */

const root = join(import.meta.dirname, "..");
/** Where named shapes are looked up: every module of these folders, and these files. */
const SHAPE_FOLDERS = ["src/domain", "src/capabilities"];
const SHAPE_FILES = ["src/adapters/contract.ts"];

interface JsonSchema {
  type?: string | string[];
  const?: unknown;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  $ref?: string;
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: JsonSchema | boolean;
  description?: string;
  $defs?: Record<string, JsonSchema>;
}

/** Every exported `FooSchema` of the shape modules, named `Foo` (the first export of a schema wins). */
async function namedShapes(): Promise<z.core.$ZodRegistry<{ id: string }>> {
  const registry = z.registry<{ id: string }>();
  const files = [...SHAPE_FILES];
  for (const folder of SHAPE_FOLDERS) {
    for (const file of (await readdir(join(root, folder))).sort())
      if (file.endsWith(".ts")) files.push(`${folder}/${file}`);
  }
  for (const file of files) {
    const module = (await import(pathToFileURL(join(root, file)).href)) as Record<string, unknown>;
    for (const [name, value] of Object.entries(module).sort(([a], [b]) => a.localeCompare(b))) {
      if (!name.endsWith("Schema") || !(value instanceof z.ZodType) || value === DomainEventSchema) continue;
      if (!registry.has(value)) registry.add(value, { id: name.slice(0, -"Schema".length) });
    }
  }
  return registry;
}

const anchor = (name: string) => `#${name.toLowerCase()}`;
const code = (text: string) => `\`${text}\``;

/** A type as Markdown for a table cell: primitives and literals in code, named shapes as links. */
function typeOf(schema: JsonSchema): string {
  if (schema.$ref) {
    const name = schema.$ref.split("/").at(-1)!;
    return `[${name}](${anchor(name)})`;
  }
  if (schema.const !== undefined) return code(JSON.stringify(schema.const));
  if (schema.enum) return schema.enum.map((v) => code(JSON.stringify(v))).join(" \\| ");
  const options = schema.anyOf ?? schema.oneOf;
  if (options) return options.map(typeOf).join(" \\| ");
  if (Array.isArray(schema.type)) return schema.type.map((type) => typeOf({ ...schema, type })).join(" \\| ");
  switch (schema.type) {
    case "array": {
      const item = typeOf(schema.items ?? {});
      return item.includes("\\|") ? `(${item})[]` : `${item}[]`;
    }
    case "object":
      if (schema.properties)
        return `{ ${Object.entries(schema.properties)
          .map(([key, value]) => `${key}${schema.required?.includes(key) ? "" : "?"}: ${typeOf(value)}`)
          .join(", ")} }`;
      return typeof schema.additionalProperties === "object"
        ? `record of ${typeOf(schema.additionalProperties)}`
        : code("object");
    case undefined:
      return code("unknown");
    default:
      return code(schema.type);
  }
}

function fieldRows(schema: JsonSchema, notes: Record<string, string> = {}, skip: string[] = []): string[] {
  const rows = ["| field | type | notes |", "|---|---|---|"];
  for (const [name, field] of Object.entries(schema.properties ?? {})) {
    if (skip.includes(name)) continue;
    const optional = schema.required?.includes(name) ? "" : " (optional)";
    const note = field.description ?? notes[name] ?? "";
    rows.push(`| ${code(name)}${optional} | ${typeOf(field)} | ${note} |`);
  }
  return rows;
}

/** Whether a per-thread subscription (`subscribe({ threadId })`) receives the event. */
function reach(schema: JsonSchema): string {
  const threadId = schema.properties?.threadId;
  if (!threadId) return "all-thread subscriptions only (it names no thread)";
  return typeOf(threadId).includes("null")
    ? "its thread's subscriptions when `threadId` is set; all-thread ones always"
    : "its thread's subscriptions and all-thread ones";
}

function shape(name: string, schema: JsonSchema): string[] {
  const lines = [`### ${name}`, ""];
  if (schema.description) lines.push(schema.description, "");
  const variants = schema.oneOf ?? schema.anyOf;
  if (schema.type === "object" && schema.properties) lines.push(...fieldRows(schema));
  else if (variants && variants.every((v) => v.type === "object" && v.properties)) {
    lines.push("One of:", "", ...variants.map((v) => `- ${typeOf(v)}`));
  } else lines.push(`${typeOf(schema)}`);
  return [...lines, ""];
}

export async function eventsBlock(): Promise<string> {
  const registry = await namedShapes();
  const json = z.toJSONSchema(DomainEventSchema, {
    metadata: registry,
    unrepresentable: "any",
    io: "output",
  }) as JsonSchema;
  const events = (json.oneOf ?? json.anyOf)!;
  const out: string[] = [`${events.length} event types.`, ""];
  out.push("| event | when |", "|---|---|");
  for (const event of events) {
    const type = String(event.properties!.type!.const);
    out.push(`| [${code(type)}](#${type.replace(/\./g, "")}) | ${firstSentence(whenOf(type, event))} |`);
  }
  out.push("", "## Events", "");
  for (const [index, event] of events.entries()) {
    const type = String(event.properties!.type!.const);
    const option = DomainEventSchema.options[index]!;
    out.push(`### ${type}`, "", whenOf(type, event), "", `Reaches: ${reach(event)}.`, "");
    out.push(...fieldRows(event, fieldNotes(type, option), ["type"]), "");
  }
  out.push("## Shapes", "", "Named shapes the events above refer to.", "");
  for (const [name, schema] of Object.entries(json.$defs ?? {})) out.push(...shape(name, schema));
  return out.join("\n").trimEnd();
}

/** Up to the first full stop that ends a sentence (one followed by a capital, or the end). */
function firstSentence(text: string): string {
  return /^.*?\.(?=\s+[A-Z]|$)/s.exec(text)?.[0] ?? text;
}

function whenOf(type: string, event: JsonSchema): string {
  const when = event.description ?? EVENT_NOTES[type]?.when;
  if (!when)
    throw new Error(
      `event ${type} has no description: add it to scripts/docsEventNotes.ts (or .describe() it in its schema)`,
    );
  return when;
}

function fieldNotes(type: string, option: z.ZodType): Record<string, string> {
  const notes = EVENT_NOTES[type]?.fields ?? {};
  const fields = Object.keys((option as unknown as { shape: Record<string, unknown> }).shape);
  const stale = Object.keys(notes).filter((field) => !fields.includes(field));
  if (stale.length > 0)
    throw new Error(`scripts/docsEventNotes.ts describes fields ${type} no longer has: ${stale.join(", ")}`);
  return notes;
}

/** Notes for event types the schema no longer has. */
export function staleEventNotes(): string[] {
  const types = new Set(DomainEventSchema.options.map((option) => option.shape.type.value as string));
  return Object.keys(EVENT_NOTES).filter((type) => !types.has(type));
}
