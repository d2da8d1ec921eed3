/** `tiller-runtime/acp`: any Agent Client Protocol agent (Gemini CLI, claude-agent-acp, codex-acp...) over stdio. */
export { createAcpAdapter, type AcpAdapter, type AcpAdapterOptions } from "./adapter.js";
export { acpCapabilities, type AcpBehaviour } from "./capabilities.js";
export { claudeAgent, codexAgent, geminiAgent, type AgentEndpoint, type AgentHome } from "./agents.js";
export type { AcpAgentCommand } from "./transport.js";
