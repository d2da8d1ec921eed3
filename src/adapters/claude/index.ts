/** `tiller-runtime/claude`: the Claude Code provider through the Agent SDK. */
export {
  createClaudeAdapter,
  type ClaudeAdapter,
  type ClaudeAdapterOptions,
  type ClaudeModelEndpoint,
} from "./adapter.js";
export { claudeCapabilities, type ClaudeCapabilities } from "./capabilities.js";
