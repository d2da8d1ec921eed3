/** JSON schema types a flat check reads by hand. */
const FLAT_TYPES: Readonly<Record<string, (value: unknown) => boolean>> = {
  string: (value) => typeof value === "string",
  boolean: (value) => typeof value === "boolean",
  null: (value) => value === null,
};

/**
 * The check of a JSON schema that is a flat object (every property of primitive type: string, boolean, null), by hand,
 * for the frames that pass by the thousand (streamed deltas): accepts only what the schema accepts and gives what a
 * loose zod object of it gives (a copy, unknown keys kept); anything else is left to the schema's own check, which
 * also says why it fails. Null for a schema that is not flat. An adapter's property test holds it to its schema.
 */
export function flatSchemaCheck(schema: object): ((params: unknown) => Record<string, unknown> | undefined) | null {
  const { type, properties, required = [] } = schema as { type?: unknown; properties?: object; required?: string[] };
  if (Object.keys(schema).some((key) => !["type", "properties", "required"].includes(key))) return null;
  if (type !== "object" || !properties) return null;
  const fields: Array<[string, Array<(value: unknown) => boolean>]> = [];
  for (const [name, property] of Object.entries(properties) as Array<[string, { type?: unknown }]>) {
    const types = [property.type].flat();
    if (Object.keys(property).some((key) => key !== "type") || types.some((t) => !Object.hasOwn(FLAT_TYPES, String(t))))
      return null;
    fields.push([name, types.map((t) => FLAT_TYPES[t as string]!)]);
  }
  const mandatory = new Set(required);
  return (params) => {
    if (typeof params !== "object" || params === null || Array.isArray(params)) return undefined;
    const value = params as Record<string, unknown>;
    for (const [name, accepts] of fields) {
      if (!Object.hasOwn(value, name)) {
        if (mandatory.has(name)) return undefined;
        continue;
      }
      if (!accepts.some((ok) => ok(value[name]))) return undefined;
    }
    return { ...value };
  };
}
