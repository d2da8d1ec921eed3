// Generated from @anthropic-ai/claude-agent-sdk 0.3.332 by scripts/claude-protocol.ts: do not edit.
// The Agent SDK types the Claude adapter is typed against, and no other.
export type {
  CanUseTool,
  Options,
  PermissionMode,
  Query,
  SDKAssistantMessage,
  SDKMessage,
  SDKPartialAssistantMessage,
  SDKResultMessage,
  SDKTaskNotificationMessage,
  SDKUserMessage,
  SessionMessage,
} from "@anthropic-ai/claude-agent-sdk";
export type {
  AgentInput,
  AskUserQuestionInput,
  BashInput,
  FileEditInput,
  FileReadInput,
  FileWriteInput,
  NotebookEditInput,
  TodoWriteInput,
} from "@anthropic-ai/claude-agent-sdk/sdk-tools";
