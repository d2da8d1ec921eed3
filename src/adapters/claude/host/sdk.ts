import { ProviderError } from "../../../domain/errors.js";

/**
 * The Agent SDK, loading from the host's first moment, in parallel with its handshake (`host.ready`, then `init`,
 * which is answered once it is loaded): it is most of the host's start-up (about 0.15-0.2 s of module loading here).
 * An SDK that fails to load fails `init`, so the host's start.
 */
type AgentSdk = typeof import("@anthropic-ai/claude-agent-sdk");

let loaded: AgentSdk | undefined;
const loading: Promise<AgentSdk> = import("@anthropic-ai/claude-agent-sdk").then(
  (sdk) => (loaded = sdk),
  (error: unknown) => {
    throw new ProviderError(`claude host: the Agent SDK did not load: ${String(error)}`);
  },
);
loading.catch(() => undefined); // told to whoever needs it, never an unhandled rejection

export const agentSdk = (): Promise<AgentSdk> => loading;

/** The SDK, for a caller that awaited `agentSdk()` before. */
export function loadedSdk(): AgentSdk {
  if (!loaded) throw new ProviderError("claude host: the Agent SDK is not loaded yet");
  return loaded;
}
