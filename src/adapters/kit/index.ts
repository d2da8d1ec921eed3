/**
 * `tiller-runtime/kit`: what an adapter needs to be written outside this repository, the same kit the Codex, Claude
 * and scripted adapters are built from (docs/adding-a-provider.md walks one from `npm init` to a passing conformance
 * run).
 *
 * Stable under `KIT_VERSION`: every name exported here, with its documented behaviour. The contract
 * (`ProviderAdapter`, `ProviderEvent` and the inputs of its methods), the capability record and its presets, the
 * link from a capability to the method that serves it (`defineAdapter`, `SERVED_BY`), the event queue, the
 * hosted-adapter methods and the host spec (`hosted`, `HostSpec`, `HostLeases`), the JSON-RPC channels (`StdioChannel`,
 * `WebSocketChannel`) and the frame limits they read under, context delivery (`deliverContext`, `userPrompt`,
 * `userContextMessages`), and the typed errors an adapter throws. A change that breaks an adapter written against
 * them bumps `KIT_VERSION`; what is not exported here (the runtime's host registry, its machines, the normalizer) may
 * change at any time. Nothing here imports the runtime: an adapter gets what it needs of the runtime through the
 * contract and the `HostLeases` port handed to it at `bindHosts`.
 */

/** The version of this entry point's contract; bumped by any change that breaks an adapter written against it. */
export const KIT_VERSION = 1;

// The contract an adapter implements, and the events it streams.
export type * from "../contract.js";
export { ProviderEventSchema } from "../contract.js";

// The capability record: its schema, the presets to start from, the questions the runtime asks of it.
export * from "../../capabilities/index.js";

// A capability linked to the method that serves it.
export { defineAdapter, SERVED_BY, unservedCapabilities, type RequiredMethods, type Serving } from "./defineAdapter.js";

// Events out, in provider order.
export { EventQueue } from "./eventQueue.js";
export { mergeDeltas, MERGED_DELTA_MAX_CHARS } from "./deltaMerge.js";
export { malformedTerminal } from "./malformedTerminal.js";

// A provider in a host process, leased from the runtime's host registry.
export { hosted, type Hosted, type HostedHooks, type HostedMethods } from "./hosted.js";
export { HostSessions } from "./hostSessions.js";
export type { HostLease, HostLeases, HostSpec, SpawnedHost, SpawnSpec } from "./hostSpec.js";
export type { SupervisorPolicy } from "../../machines/hostSupervisor.js";
export { nodeHostScript } from "./hostScript.js";

// JSON-RPC to a host: the channels, the frame ring, the size limits they read under.
export { RpcChannel } from "./rpcChannel.js";
export { StdioChannel } from "./stdioChannel.js";
export { WebSocketChannel, type ReconnectPolicy } from "./webSocketChannel.js";
export { FrameRing, type FrameAnomaly } from "./ring.js";
export { frameTooLarge, readDiagnostics, resolveLimits, type ChannelLimits } from "./frameLimits.js";
export {
  BoundedLineSplitter,
  checkLineLimit,
  HOST_LINE_LIMITS,
  MAX_LINE_LIMIT_BYTES,
  readLines,
  type LineOverflow,
  type LineReader,
  type LineSplitterOptions,
} from "./lines.js";

// A turn's explicit context, placed where the runtime's decision says.
export { contextHeader, deliverContext, userContextMessages, userPrompt, type DeliveredContext } from "./context.js";

// The typed errors an adapter throws (the same classes the runtime's public API exports).
export {
  CapabilityUnsupportedError,
  ConflictError,
  HostUnavailableError,
  InvalidInputError,
  isTillerError,
  NotFoundError,
  NotResumableError,
  ProtocolError,
  ProviderError,
  ResumeFailedError,
  TillerError,
  type TillerErrorCode,
} from "../../domain/errors.js";
