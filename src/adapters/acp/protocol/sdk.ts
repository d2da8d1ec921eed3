// Generated from @agentclientprotocol/sdk 2.4.0 by scripts/acp-protocol.ts: do not edit.
// The ACP SDK types the ACP adapter is typed against, and no other (the SDK's unstable entry: session/fork,
// session/resume and session/close are in it).
export type {
  AnyMessage,
  ClientApp,
  ClientConnection,
  ContentBlock,
  InitializeResponse,
  JsonRpcId,
  PermissionOption,
  PromptResponse,
  RequestPermissionRequest,
  RequestPermissionResponse,
  SessionConfigOption,
  SessionNotification,
  SessionUpdate,
  ToolCall,
  ToolCallContent,
  ToolCallUpdate,
  ToolKind,
} from "@agentclientprotocol/sdk/unstable";
