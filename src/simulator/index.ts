/**
 * tiller-runtime/simulator: a loopback stand-in for the OpenAI Responses, Anthropic Messages and
 * Gemini APIs, so the real Codex, Claude Code and Gemini CLI binaries can be driven offline from a script.
 */
export { startModelSimulator } from "./server.js";
export type {
  DialectName,
  ModelSimulator,
  ModelSimulatorOptions,
  Reply,
  ReplySpec,
  SimulatorRequest,
  ToolCallSpec,
} from "./types.js";
