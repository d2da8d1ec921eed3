import type { ChildProcess } from "node:child_process";
import { StdioChannel } from "../kit/stdioChannel.js";
import type { RpcMessage } from "../kit/jsonRpc.js";
import type { FrameRing } from "../kit/ring.js";

/**
 * The one handwritten transport of the Codex adapter: `codex app-server` speaks JSON-RPC
 * over stdio as JSON lines without the `"jsonrpc"` field, and sends requests of its own
 * (approvals, user input) that we answer with `respond`.
 */
export class CodexChannel extends StdioChannel {
  constructor(child: ChildProcess, ring: FrameRing) {
    super(child, ring);
  }

  protected override encode(message: RpcMessage): string {
    const { jsonrpc: _omitted, ...rest } = message as RpcMessage & { jsonrpc?: string };
    return JSON.stringify(rest);
  }
}
