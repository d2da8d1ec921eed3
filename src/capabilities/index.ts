export * from "./schema.js";
export * from "./presets.js";
export * from "./predicates.js";
