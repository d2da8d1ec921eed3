/** `tiller-runtime/codex`: the Codex provider (codex app-server) and its offline helpers. */
export { createCodexAdapter, type CodexAdapter, type CodexAdapterOptions } from "./adapter.js";
export { codexCapabilities, codexVersion, type CodexCapabilities } from "./capabilities.js";
export {
  codexSimulatorOptions,
  installedCodexBinary,
  resolveCodexBinary,
  type CodexConfigValue,
  type CodexModelEndpoint,
} from "./transport.js";
