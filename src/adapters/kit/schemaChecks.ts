/**
 * A JSON schema's check by hand, for the frames that pass by the thousand (streamed deltas, the items that open and
 * close around them): zod's check of the same schema (`z.fromJSONSchema`) is the contract, and costs ten times more.
 * The hand check reads a plain subset of JSON schema: objects (extra keys kept, as zod's loose objects keep them),
 * arrays, strings, booleans, null, integers and their bounds, string enums, defaults, `$ref`, `anyOf`, `oneOf`, and an
 * `allOf` of one schema.
 * Whatever it is not sure of, it leaves to zod (which accepts it or says why not): it accepts only what zod accepts,
 * and gives what zod gives (equal values; the input itself where zod's copy would change nothing). An adapter's
 * property test holds it to its schemas.
 */
import { z } from "zod";

/** A value a check leaves to zod's. */
const DEFER: unique symbol = Symbol("defer");

interface Check {
  /** The value as zod's check gives it, or DEFER. */
  read(value: unknown): unknown;
  /** True only when zod's check surely rejects the value (false: it may accept it). */
  rejects(value: unknown): boolean;
}

const UNSURE: Check = { read: () => DEFER, rejects: () => false };
const STRING = primitive((v) => typeof v === "string");
/** What an object's check does with an absent property: fills its default, or leaves it out. */
const FILL = 1;
const SKIP = 2;

type Schema = { readonly [keyword: string]: unknown };

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);
/** An object as JSON.parse makes them (zod gives one such for any object it reads). */
const isPlain = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && Object.getPrototypeOf(value) === Object.prototype;
const only = (schema: Schema, keywords: readonly string[]) => Object.keys(schema).every((k) => keywords.includes(k));

/** Type keywords, and what zod reads beside them (a keyword of another type, it ignores). */
const TYPED = ["type", "properties", "required", "items", "format", "minimum", "maximum"];

/**
 * The hand check of `schema` (its `$ref`s into `definitions`): the value as zod's check of it gives it, or undefined
 * for a value it leaves to zod.
 */
export function schemaReader(
  schema: object,
  definitions: Readonly<Record<string, object>>,
): (value: unknown) => unknown | undefined {
  const made = new Map<string, Check>();
  const ref = (name: string): Check => {
    let check = made.get(name);
    if (!check) {
      // Placed before it is made: a definition may refer to itself (through this forward, while it is being made).
      const target: { check: Check } = { check: UNSURE };
      made.set(name, { read: (v) => target.check.read(v), rejects: (v) => target.check.rejects(v) });
      const definition = Object.hasOwn(definitions, name) ? definitions[name] : undefined;
      check = target.check = isObject(definition) ? compile(definition) : UNSURE;
      made.set(name, check);
    }
    return check;
  };

  const compile = (schema: Schema): Check => {
    if (schema.default !== undefined) {
      const { default: fallback, ...rest } = schema;
      const fresh = defaultOf(fallback);
      if (!fresh) return UNSURE;
      const inner = compile(rest);
      return {
        read: (v) => (v === undefined ? fresh() : inner.read(v)),
        rejects: (v) => v !== undefined && inner.rejects(v),
      };
    }
    if (schema.$ref !== undefined) {
      const name = typeof schema.$ref === "string" ? /^#\/definitions\/([^/~]+)$/.exec(schema.$ref)?.[1] : undefined;
      return name && only(schema, ["$ref"]) ? ref(name) : UNSURE;
    }
    if (schema.enum !== undefined) {
      const values = schema.enum;
      if (!only(schema, ["enum", "type"]) || !Array.isArray(values) || !values.every((v) => typeof v === "string"))
        return UNSURE;
      const accepted = new Set<unknown>(values);
      return { read: (v) => (accepted.has(v) ? v : DEFER), rejects: (v) => !accepted.has(v) };
    }
    // One schema in an allOf is that schema (zod makes it so); more would be an intersection, left to zod.
    if (schema.allOf !== undefined)
      return Array.isArray(schema.allOf) && schema.allOf.length === 1 && only(schema, ["allOf"])
        ? compileAny(schema.allOf[0])
        : UNSURE;
    if (schema.anyOf !== undefined)
      return Array.isArray(schema.anyOf) && only(schema, ["anyOf"]) ? anyOf(schema.anyOf.map(compileAny)) : UNSURE;
    if (schema.oneOf !== undefined)
      return Array.isArray(schema.oneOf) && only(schema, ["oneOf"]) ? oneOf(schema.oneOf) : UNSURE;
    if (schema.type === undefined || !only(schema, TYPED)) return UNSURE;
    if (!Array.isArray(schema.type)) return typed(schema.type, schema);
    return anyOf(schema.type.map((type: unknown) => typed(type, schema)));
  };
  const compileAny = (schema: unknown): Check => (isObject(schema) ? compile(schema) : UNSURE);

  const typed = (type: unknown, schema: Schema): Check => {
    switch (type) {
      case "string":
        return schema.format === undefined ? STRING : UNSURE;
      case "boolean":
        return primitive((v) => typeof v === "boolean");
      case "null":
        return primitive((v) => v === null);
      case "integer":
      case "number": {
        const { minimum = -Infinity, maximum = Infinity } = schema;
        if (typeof minimum !== "number" || typeof maximum !== "number") return UNSURE;
        const number = type === "integer" ? Number.isSafeInteger : Number.isFinite;
        return primitive((v) => number(v) && (v as number) >= minimum && (v as number) <= maximum);
      }
      case "array":
        return isObject(schema.items) ? array(compile(schema.items)) : UNSURE;
      case "object":
        return object(schema);
      default:
        return UNSURE;
    }
  };

  /** zod's loose object: the properties checked (defaults filled), other keys kept as they are. */
  const object = (schema: Schema): Check => {
    const properties = schema.properties ?? {};
    const required = schema.required ?? [];
    if (!isObject(properties) || !Array.isArray(required)) return UNSURE;
    // A name of Object.prototype (`__proto__`, `constructor`) reads differently in zod: left to it.
    if (Object.keys(properties).some((name) => name in Object.prototype)) return UNSURE;
    if (required.some((name) => typeof name !== "string" || !Object.hasOwn(properties, name))) return UNSURE;
    const fields = Object.entries(properties).map(([name, property]) => ({
      name,
      check: compileAny(property),
      required: required.includes(name),
      defaulted: isObject(property) && property.default !== undefined,
    }));
    // Columns, and a string's check inline: the loop below runs for every field of every frame.
    const names = fields.map((f) => f.name);
    const checks = fields.map((f) => f.check);
    const strings = fields.map((f) => f.check === STRING);
    const absent = fields.map((f) => (f.defaulted ? FILL : f.required ? DEFER : SKIP));
    return {
      read: (value) => {
        // zod drops an own `__proto__` key (JSON.parse makes one): left to it.
        if (!isPlain(value) || Object.hasOwn(value, "__proto__")) return DEFER;
        let copy: Record<string, unknown> | undefined;
        for (let i = 0; i < names.length; i++) {
          const name = names[i]!;
          const v = value[name];
          if (v === undefined) {
            if (name in value) return DEFER; // a key set to undefined: not JSON, left to zod
            if (absent[i] === DEFER) return DEFER;
            if (absent[i] === SKIP) continue;
          } else if (strings[i]) {
            if (typeof v !== "string") return DEFER;
            continue;
          }
          const read = checks[i]!.read(v);
          if (read === DEFER) return DEFER;
          if (read !== v) (copy ??= { ...value })[name] = read;
        }
        return copy ?? value;
      },
      rejects: (value) =>
        !isObject(value) ||
        fields.some(({ name, check, required, defaulted }) =>
          value[name] === undefined ? required && !defaulted : check.rejects(value[name]),
        ),
    };
  };

  /**
   * zod's exclusive union. A union of objects told apart by a required one-string property (`type`) goes straight to
   * the one its value names: every other one surely rejects the value.
   */
  const oneOf = (branches: unknown[]): Check => {
    const checks = branches.map(compileAny);
    const tagged = discriminator(branches);
    if (tagged) {
      const { key, tags } = tagged;
      const byTag = new Map(tags.map((tag, i) => [tag, checks[i]!]));
      const at = (v: unknown) => (isObject(v) ? byTag.get(v[key]) : undefined);
      return {
        read: (v) => at(v)?.read(v) ?? DEFER,
        rejects: (v) => at(v)?.rejects(v) ?? true,
      };
    }
    return {
      read: (v) => {
        const open = checks.filter((check) => !check.rejects(v));
        return open.length === 1 ? open[0]!.read(v) : DEFER;
      },
      rejects: (v) => checks.every((check) => check.rejects(v)),
    };
  };

  const root = compile(schema as Schema);
  return (value) => {
    const read = root.read(value);
    return read === DEFER ? undefined : read;
  };
}

/** A check of a primitive, which zod gives back as it is. */
function primitive(accepts: (value: unknown) => boolean): Check {
  return { read: (v) => (accepts(v) ? v : DEFER), rejects: (v) => !accepts(v) };
}

/** zod's union: the first branch that accepts; each before it must surely reject. */
function anyOf(checks: Check[]): Check {
  return {
    read: (v) => {
      for (const check of checks) if (!check.rejects(v)) return check.read(v);
      return DEFER;
    },
    rejects: (v) => checks.every((check) => check.rejects(v)),
  };
}

function array(item: Check): Check {
  return {
    read: (value) => {
      if (!Array.isArray(value)) return DEFER;
      let copy: unknown[] | undefined;
      for (let i = 0; i < value.length; i++) {
        const read = item.read(value[i]);
        if (read === DEFER) return DEFER;
        if (read !== value[i]) (copy ??= value.slice())[i] = read;
      }
      return copy ?? value;
    },
    rejects: (value) => !Array.isArray(value) || value.some((v) => item.rejects(v)),
  };
}

/** A default zod fills in for an absent value, made afresh each time; null for one read by zod only. */
function defaultOf(fallback: unknown): (() => unknown) | null {
  if (fallback === null || ["string", "number", "boolean"].includes(typeof fallback)) return () => fallback;
  return Array.isArray(fallback) && fallback.length === 0 ? () => [] : null;
}

/** The property every branch requires with one string value of its own, by which a value names its branch; or null. */
function discriminator(branches: unknown[]): { key: string; tags: unknown[] } | null {
  const first = branches[0];
  if (!isObject(first) || !Array.isArray(first.required)) return null;
  for (const key of first.required as unknown[]) {
    if (typeof key !== "string") continue;
    const tags = branches.map((branch) => {
      if (!isObject(branch) || branch.type !== "object" || !Array.isArray(branch.required)) return undefined;
      if (!branch.required.includes(key) || !isObject(branch.properties)) return undefined;
      const tag = branch.properties[key];
      if (!isObject(tag) || !only(tag, ["enum", "type"]) || !Array.isArray(tag.enum)) return undefined;
      return tag.enum.length === 1 ? tag.enum[0] : undefined;
    });
    if (tags.every((tag) => typeof tag === "string") && new Set(tags).size === tags.length) return { key, tags };
  }
  return null;
}

/** The checks of a JSON schema, each made on first use: by hand (`schemaReader`), and zod's for what that leaves. */
export interface SchemaChecks {
  zod(): z.ZodType;
  hand(): (value: unknown) => unknown | undefined;
  /** The value as zod's check gives it (read by hand where the hand check can), or why it does not match. */
  read(value: unknown): { ok: true; value: unknown } | { ok: false; error: z.ZodError };
}

export function schemaChecks(schema: object, definitions: Readonly<Record<string, object>>): SchemaChecks {
  let zod: z.ZodType | undefined;
  let hand: ((value: unknown) => unknown | undefined) | undefined;
  const checks: SchemaChecks = {
    zod: () => (zod ??= z.fromJSONSchema({ definitions, ...schema } as never, { defaultTarget: "draft-7" })),
    hand: () => (hand ??= schemaReader(schema, definitions)),
    read(value) {
      const read = checks.hand()(value);
      if (read !== undefined) return { ok: true, value: read };
      const parsed = checks.zod().safeParse(value);
      return parsed.success ? { ok: true, value: parsed.data } : { ok: false, error: parsed.error };
    },
  };
  return checks;
}
