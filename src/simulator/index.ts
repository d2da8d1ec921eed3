/**
 * tiller-runtime/simulator: a loopback stand-in for the OpenAI Responses and Anthropic Messages
 * APIs, so the real Codex and Claude Code binaries can be driven offline from a script.
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
