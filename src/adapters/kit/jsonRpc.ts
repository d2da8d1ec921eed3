import { z } from "zod";
import { isTillerError, TillerError, type TillerErrorCode } from "../../domain/errors.js";

/**
 * JSON-RPC 2.0 framing shared by every host transport (newline-delimited over stdio, one
 * message per WebSocket text frame). Errors carry the Tiller error code in `data`, so a typed
 * error thrown in a host process arrives as the same typed error in the runtime.
 */

// `jsonrpc` is optional on the way in: some hosts (Codex's app-server) speak JSON-RPC without it.
const version = { jsonrpc: z.literal("2.0").optional() };
export const RpcMessageSchema = z.union([
  z.object({ ...version, id: z.number().int(), method: z.string(), params: z.unknown().optional() }),
  z.object({ ...version, method: z.string(), params: z.unknown().optional() }),
  z.object({ ...version, id: z.number().int(), result: z.unknown() }),
  z.object({
    ...version,
    id: z.number().int().nullable(),
    error: z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }),
  }),
]);
export type RpcMessage = z.infer<typeof RpcMessageSchema>;

export const request = (id: number, method: string, params?: unknown): RpcMessage => ({
  jsonrpc: "2.0",
  id,
  method,
  params,
});
export const notification = (method: string, params?: unknown): RpcMessage => ({ jsonrpc: "2.0", method, params });
export const result = (id: number, value: unknown): RpcMessage => ({ jsonrpc: "2.0", id, result: value ?? null });

/** A thrown error as a JSON-RPC error response (typed errors keep their code and details). */
export function errorResponse(id: number | null, error: unknown): RpcMessage {
  const message = error instanceof Error ? error.message : String(error);
  const data = isTillerError(error) ? { tillerCode: error.code, details: error.details } : undefined;
  return { jsonrpc: "2.0", id, error: { code: -32000, message, ...(data ? { data } : {}) } };
}

/** The error a JSON-RPC error response stands for, typed when the host said which. */
export function toError(error: { code: number; message: string; data?: unknown }): Error & { rpcCode?: number } {
  const data = error.data as { tillerCode?: TillerErrorCode; details?: Record<string, unknown> } | undefined;
  if (data?.tillerCode) return new TillerError(data.tillerCode, error.message, data.details ?? {});
  // The JSON-RPC code stays with the error: callers tell "no such thing" from "try again".
  return Object.assign(new Error(error.message), { rpcCode: error.code });
}

/** JSON-RPC "invalid request": the host understood and refused (no such thread...), not a transient failure. */
export const INVALID_REQUEST = -32600;

export function parseMessage(line: string): RpcMessage | null {
  const frame = parseFrame(line);
  return frame.kind === "message" ? frame.message : null;
}

/** A received frame: a message, or why it is none (not JSON at all, or JSON that is not JSON-RPC). */
export function parseFrame(
  line: string,
): { kind: "message"; message: RpcMessage } | { kind: "not_json" } | { kind: "not_rpc" } {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch {
    return { kind: "not_json" };
  }
  const message = readRpc(raw);
  return message ? { kind: "message", message } : { kind: "not_rpc" };
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const isInt = (value: unknown): value is number => typeof value === "number" && Number.isSafeInteger(value);

/**
 * `RpcMessageSchema` applied by hand to a parsed frame (every frame of every host passes here): the same union tried
 * in the same order, the same keys kept (present ones, even undefined), the unknown ones dropped, the params and
 * results passed on as they are. A property test holds it to the schema.
 */
export function readRpc(raw: unknown): RpcMessage | null {
  if (!isObject(raw)) return null;
  if (raw.jsonrpc !== undefined && raw.jsonrpc !== "2.0") return null;
  const version = "jsonrpc" in raw ? { jsonrpc: raw.jsonrpc as "2.0" | undefined } : {};
  const params = "params" in raw ? { params: raw.params } : {};
  if (typeof raw.method === "string") {
    return isInt(raw.id)
      ? { ...version, id: raw.id, method: raw.method, ...params }
      : { ...version, method: raw.method, ...params };
  }
  if (isInt(raw.id) && "result" in raw) return { ...version, id: raw.id, result: raw.result };
  const { error } = raw;
  if ((raw.id === null || isInt(raw.id)) && isObject(error) && isInt(error.code) && typeof error.message === "string") {
    const data = "data" in error ? { data: error.data } : {};
    return { ...version, id: raw.id, error: { code: error.code, message: error.message, ...data } };
  }
  return null;
}
