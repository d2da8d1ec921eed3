/** The scripted provider: a real adapter whose "model" is a script, in process or in a host process of its own. */
export {
  createScriptedAdapter,
  createScriptedHostAdapter,
  DEFAULT_ORPHAN_TTL_MS,
  type HostedCapabilities,
  type ScriptedAdapter,
  type ScriptedAdapterOptions,
  type ScriptedCapabilities,
  type ScriptedHostAdapter,
  type ScriptedHostOptions,
  type ScriptedRecord,
} from "./adapter.js";
export { ScriptedBackend } from "./host/backend.js";
export { keyedScript, echoScript, ScriptStepSchema, type ScriptStep, type ScriptSource } from "./host/script.js";
export { resolveCapabilities } from "./capabilities.js";
