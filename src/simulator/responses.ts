/**
 * OpenAI Responses API (POST /v1/responses), the dialect Codex CLI speaks. Event names and
 * payload fields follow the public streaming reference; Codex only reads a subset, but the
 * rest is emitted so stricter clients parse the stream too.
 */
import {
  joined,
  streamFlag,
  type Dialect,
  type RenderContext,
  type SseEvent,
  type Turn,
  type TurnBlock,
} from "./dialect.js";

const USAGE = {
  input_tokens: 100,
  input_tokens_details: { cached_tokens: 0 },
  output_tokens: 10,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: 110,
};

type Item = Record<string, unknown> & { id: string };

/** One output item: its in-progress and final shapes and the events between added and done. */
interface ItemRender {
  added: Item;
  done: Item;
  inner: SseEvent[];
}

function renderItem(block: TurnBlock, ctx: RenderContext): ItemRender {
  switch (block.kind) {
    case "text": {
      const id = ctx.nextId("msg");
      const text = joined(block.chunks);
      const part = (t: string) => ({ type: "output_text", text: t, annotations: [] });
      const at = { item_id: id, content_index: 0 };
      return {
        added: { type: "message", id, role: "assistant", status: "in_progress", content: [] },
        done: { type: "message", id, role: "assistant", status: "completed", content: [part(text)] },
        inner: [
          { event: "response.content_part.added", data: { ...at, part: part("") } },
          ...block.chunks.map((delta) => ({
            event: "response.output_text.delta",
            data: { ...at, delta },
            textDelta: true,
          })),
          { event: "response.output_text.done", data: { ...at, text } },
          { event: "response.content_part.done", data: { ...at, part: part(text) } },
        ],
      };
    }
    case "reasoning": {
      const id = ctx.nextId("rs");
      const text = joined(block.chunks);
      const at = { item_id: id, summary_index: 0 };
      return {
        added: { type: "reasoning", id, summary: [] },
        done: { type: "reasoning", id, summary: [{ type: "summary_text", text }] },
        inner: [
          { event: "response.reasoning_summary_part.added", data: { ...at, part: { type: "summary_text", text: "" } } },
          ...block.chunks.map((delta) => ({ event: "response.reasoning_summary_text.delta", data: { ...at, delta } })),
          { event: "response.reasoning_summary_text.done", data: { ...at, text } },
          { event: "response.reasoning_summary_part.done", data: { ...at, part: { type: "summary_text", text } } },
        ],
      };
    }
    case "function": {
      const id = ctx.nextId("fc");
      const callId = block.callId ?? ctx.nextId("call");
      const args = joined(block.argChunks);
      const item = (status: string, argumentsText: string) => ({
        type: "function_call",
        id,
        call_id: callId,
        name: block.name,
        arguments: argumentsText,
        status,
      });
      return {
        added: item("in_progress", ""),
        done: item("completed", args),
        inner: [
          ...block.argChunks.map((delta) => ({
            event: "response.function_call_arguments.delta",
            data: { item_id: id, delta },
          })),
          { event: "response.function_call_arguments.done", data: { item_id: id, arguments: args } },
        ],
      };
    }
    case "custom": {
      const id = ctx.nextId("ctc");
      const callId = block.callId ?? ctx.nextId("call");
      const item = (status: string, input: string) => ({
        type: "custom_tool_call",
        id,
        call_id: callId,
        name: block.name,
        input,
        status,
      });
      return {
        added: item("in_progress", ""),
        done: item("completed", block.input),
        inner: [
          ...block.inputChunks.map((delta) => ({
            event: "response.custom_tool_call_input.delta",
            data: { item_id: id, delta },
          })),
          { event: "response.custom_tool_call_input.done", data: { item_id: id, input: block.input } },
        ],
      };
    }
  }
}

function responseObject(id: string, ctx: RenderContext, status: string, output: Item[], createdAt: number) {
  return {
    id,
    object: "response",
    created_at: createdAt,
    status,
    model: ctx.model,
    output,
    ...(status === "completed" ? { usage: USAGE } : {}),
  };
}

export const responsesDialect: Dialect = {
  name: "responses",

  matches: (method, pathname) => method === "POST" && pathname === "/v1/responses",

  // Codex always asks for a stream; only an explicit `stream: false` gets a JSON document.
  streams: (body) => streamFlag(body) !== false,

  stream(turn: Turn, ctx: RenderContext): SseEvent[] {
    const id = ctx.nextId("resp");
    const createdAt = Math.floor(Date.now() / 1000);
    const raw: SseEvent[] = [
      { event: "response.created", data: { response: responseObject(id, ctx, "in_progress", [], createdAt) } },
    ];
    const finished: Item[] = [];
    turn.blocks.forEach((block, outputIndex) => {
      const item = renderItem(block, ctx);
      raw.push({ event: "response.output_item.added", data: { output_index: outputIndex, item: item.added } });
      for (const e of item.inner) raw.push({ ...e, data: { ...e.data, output_index: outputIndex } });
      raw.push({ event: "response.output_item.done", data: { output_index: outputIndex, item: item.done } });
      finished.push(item.done);
    });
    raw.push({
      event: "response.completed",
      data: { response: responseObject(id, ctx, "completed", finished, createdAt) },
    });
    // The wire carries `type` inside every payload and a stream-wide sequence number.
    return raw.map((e, sequence) => ({ ...e, data: { type: e.event, sequence_number: sequence, ...e.data } }));
  },

  json(turn: Turn, ctx: RenderContext): unknown {
    const id = ctx.nextId("resp");
    const output = turn.blocks.map((block) => renderItem(block, ctx).done);
    return responseObject(id, ctx, "completed", output, Math.floor(Date.now() / 1000));
  },

  error(status: number, message: string): unknown {
    return { error: { message, type: errorType(status), param: null, code: null } };
  },
};

function errorType(status: number): string {
  if (status === 429) return "rate_limit_exceeded";
  if (status >= 500) return "server_error";
  if (status === 401) return "invalid_api_key";
  return "invalid_request_error";
}
