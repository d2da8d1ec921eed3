/**
 * Anthropic Messages API (POST /v1/messages, with or without `?beta=true`), the dialect
 * Claude Code speaks. Events follow the public streaming reference.
 */
import {
  chunkJson,
  joined,
  streamFlag,
  type Dialect,
  type RenderContext,
  type SseEvent,
  type Turn,
  type TurnBlock,
} from "./dialect.js";

// The real signature is opaque to clients; they only echo it back on the next request.
const SIGNATURE = "c2ltdWxhdG9yLXNpZ25hdHVyZQ==";

const START_USAGE = { input_tokens: 100, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 };

interface BlockRender {
  start: Record<string, unknown>;
  final: Record<string, unknown>;
  deltas: Array<{ delta: Record<string, unknown>; textDelta?: boolean }>;
}

function toolInput(block: Extract<TurnBlock, { kind: "function" | "custom" }>): { input: unknown; chunks: string[] } {
  // Messages has no free-form tools: a custom call travels as a tool_use whose input is {input}.
  if (block.kind === "custom") {
    return { input: { input: block.input }, chunks: chunkJson(JSON.stringify({ input: block.input })) };
  }
  return { input: block.args ?? {}, chunks: block.argChunks };
}

function renderBlock(block: TurnBlock, ctx: RenderContext): BlockRender {
  switch (block.kind) {
    case "text": {
      return {
        start: { type: "text", text: "" },
        final: { type: "text", text: joined(block.chunks) },
        deltas: block.chunks.map((text) => ({ delta: { type: "text_delta", text }, textDelta: true })),
      };
    }
    case "reasoning": {
      return {
        start: { type: "thinking", thinking: "", signature: "" },
        final: { type: "thinking", thinking: joined(block.chunks), signature: SIGNATURE },
        deltas: [
          ...block.chunks.map((thinking) => ({ delta: { type: "thinking_delta", thinking } })),
          { delta: { type: "signature_delta", signature: SIGNATURE } },
        ],
      };
    }
    case "function":
    case "custom": {
      const id = block.callId ?? ctx.nextId("toolu");
      const { input, chunks } = toolInput(block);
      return {
        start: { type: "tool_use", id, name: block.name, input: {} },
        final: { type: "tool_use", id, name: block.name, input },
        deltas: chunks.map((partial_json) => ({ delta: { type: "input_json_delta", partial_json } })),
      };
    }
  }
}

function stopReason(turn: Turn): string {
  return turn.blocks.some((b) => b.kind === "function" || b.kind === "custom") ? "tool_use" : "end_turn";
}

export const messagesDialect: Dialect = {
  name: "messages",

  matches: (method, pathname) => method === "POST" && pathname === "/v1/messages",

  // Like the real API, an absent flag means one JSON document: the SDK omits it for non-streaming calls.
  streams: (body) => streamFlag(body) === true,

  // Claude Code checks a model it switches to with a one-token, tool-less request.
  probe: (body) => {
    const b = body as { max_tokens?: unknown; tools?: unknown } | null;
    return b && b.max_tokens === 1 && b.tools === undefined ? { text: "ok" } : null;
  },

  stream(turn: Turn, ctx: RenderContext): SseEvent[] {
    const message = {
      id: ctx.nextId("msg"),
      type: "message",
      role: "assistant",
      model: ctx.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: START_USAGE,
    };
    const events: SseEvent[] = [
      { event: "message_start", data: { type: "message_start", message } },
      { event: "ping", data: { type: "ping" } },
    ];
    turn.blocks.forEach((block, index) => {
      const rendered = renderBlock(block, ctx);
      events.push({
        event: "content_block_start",
        data: { type: "content_block_start", index, content_block: rendered.start },
      });
      for (const { delta, textDelta } of rendered.deltas) {
        const event: SseEvent = { event: "content_block_delta", data: { type: "content_block_delta", index, delta } };
        if (textDelta) event.textDelta = true;
        events.push(event);
      }
      events.push({ event: "content_block_stop", data: { type: "content_block_stop", index } });
    });
    events.push(
      {
        event: "message_delta",
        data: {
          type: "message_delta",
          delta: { stop_reason: stopReason(turn), stop_sequence: null },
          usage: { output_tokens: 10 },
        },
      },
      { event: "message_stop", data: { type: "message_stop" } },
    );
    return events;
  },

  json(turn: Turn, ctx: RenderContext): unknown {
    return {
      id: ctx.nextId("msg"),
      type: "message",
      role: "assistant",
      model: ctx.model,
      content: turn.blocks.map((block) => renderBlock(block, ctx).final),
      stop_reason: stopReason(turn),
      stop_sequence: null,
      usage: { ...START_USAGE, output_tokens: 10 },
    };
  },

  error(status: number, message: string): unknown {
    return { type: "error", error: { type: errorType(status), message } };
  },
};

function errorType(status: number): string {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}
