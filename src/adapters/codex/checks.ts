import { z } from "zod";
import { ProtocolError } from "../../domain/errors.js";
import { schemaChecks, type SchemaChecks } from "../kit/schemaChecks.js";
import { CODEX_DEFINITIONS, CODEX_VALIDATED_PARAMS } from "./protocol/schemas.js";
import type { CodexCalls, CodexNotifications, CodexServerRequests, ThreadItem } from "./protocol/types.js";

/**
 * What `codex app-server` sends, checked where it arrives (the channel is transport.ts): the notifications the mapper
 * reads and the requests the adapter answers, against the binary's own schema (protocol/schemas.ts), come out typed or
 * as a ProtocolError; so do the replies the adapter reads (`checkReply`), so a reply of the wrong shape is a
 * ProtocolError naming the call, never a TypeError where the adapter reads it.
 */

// ---------------------------------------------------------------------------------------------
// The frames

/** A thread item of a type this binary's schema does not name (a newer binary's): its type and id only. */
export interface UnknownThreadItem {
  type: "(unknown)";
  nativeType: string;
  id: string;
}
export type CodexThreadItem = ThreadItem | UnknownThreadItem;

type WithItem<T> = T extends { item: ThreadItem } ? Omit<T, "item"> & { item: CodexThreadItem } : T;

/** A notification the mapper reads, checked against the schema. */
export type CodexNotification = {
  [M in keyof CodexNotifications]: { method: M; params: WithItem<CodexNotifications[M]> };
}[keyof CodexNotifications];

/** A server request the adapter answers, checked against the schema. */
export type CodexServerRequest = {
  [M in keyof CodexServerRequests]: { method: M; params: CodexServerRequests[M]["params"] };
}[keyof CodexServerRequests];

export type CodexServerAnswer = CodexServerRequests[keyof CodexServerRequests]["result"];

/** A server request the adapter does not answer: only where it belongs is read. */
export interface UnhandledServerRequest {
  method: string;
  threadId: string | null;
}

const Located = z.looseObject({ threadId: z.string().optional() });

/** Definitions as the checks read them: the item union left open (see itemChecks). */
const OPEN_DEFINITIONS = {
  ...CODEX_DEFINITIONS,
  ThreadItem: {
    type: "object",
    properties: { type: { type: "string" }, id: { type: "string" } },
    required: ["type", "id"],
  },
};

/**
 * The checks derived from the binary's schema for a definition (the item union left open: see itemChecks): zod's, and
 * the same by hand (kit/schemaChecks.ts) first, since streamed deltas and the items around them pass by the thousand.
 */
export const definitionChecks = (definition: string) =>
  schemaChecks({ $ref: `#/definitions/${definition}` }, OPEN_DEFINITIONS);

const ITEM_VARIANTS = (CODEX_DEFINITIONS.ThreadItem as { oneOf: Array<{ properties: { type: { enum: string[] } } }> })
  .oneOf;

/**
 * Each item type the schema names, and its checks (by hand first, zod for what the hand check leaves); an item of
 * another type is a newer binary's, not an error.
 */
export const itemChecks: ReadonlyMap<string, SchemaChecks> = new Map(
  ITEM_VARIANTS.map((variant) => [variant.properties.type.enum[0]!, schemaChecks(variant, CODEX_DEFINITIONS)]),
);

/** Each validated method's checks. */
const validated = new Map(
  Object.entries(CODEX_VALIDATED_PARAMS).map(([method, definition]) => [method, definitionChecks(definition)]),
);

function invalid(kind: string, method: string, error: z.ZodError): ProtocolError {
  const issues = error.issues.slice(0, 3).map((i) => `${i.path.join(".") || "(params)"}: ${i.message}`);
  return new ProtocolError(`codex ${kind} ${method} does not match its schema: ${issues.join("; ")}`, { method });
}

type Checked = { item?: { type: string; id: string; [field: string]: unknown } };

/** The params of a validated method, typed; a ProtocolError if they do not match; null for a method not validated. */
function parse(kind: string, method: string, params: unknown): Checked | ProtocolError | null {
  const checks = validated.get(method);
  if (!checks) return null;
  const read = checks.read(params ?? {});
  if (!read.ok) return invalid(kind, method, read.error);
  const value = read.value as Checked;
  if (!value.item) return value;
  const { type, id } = value.item;
  const itemCheck = itemChecks.get(type);
  if (!itemCheck) return { ...value, item: { type: "(unknown)", nativeType: type, id } };
  const item = itemCheck.read(value.item);
  if (!item.ok) return invalid(kind, `${method} (${type} item)`, item.error);
  return item.value === value.item ? value : { ...value, item: item.value as Checked["item"] };
}

/** A notification as the mapper takes it; null for one it does not read (nothing to check). */
export function parseNotification(method: string, params: unknown): CodexNotification | ProtocolError | null {
  const parsed = parse("notification", method, params);
  return parsed === null || parsed instanceof ProtocolError
    ? parsed
    : ({ method, params: parsed } as CodexNotification);
}

/** A server request as the adapter answers it, or what little an unanswered one says of itself. */
export function parseServerRequest(
  method: string,
  params: unknown,
): CodexServerRequest | UnhandledServerRequest | ProtocolError {
  const parsed = parse("request", method, params);
  if (parsed === null) {
    const located = Located.safeParse(params);
    return { method, threadId: located.success ? (located.data.threadId ?? null) : null };
  }
  return parsed instanceof ProtocolError ? parsed : ({ method, params: parsed } as CodexServerRequest);
}

export const isAnswered = (request: CodexServerRequest | UnhandledServerRequest): request is CodexServerRequest =>
  validated.has(request.method);

/** Where a frame that did not match its schema says it belongs, as far as it can be read. */
export interface Whereabouts {
  method: string;
  threadId?: string;
  turnId?: string;
}

const Addressed = z.looseObject({
  threadId: z.string().min(1).optional().catch(undefined),
  turnId: z.string().min(1).optional().catch(undefined),
  turn: z
    .looseObject({ id: z.string().min(1).optional().catch(undefined) })
    .optional()
    .catch(undefined),
});

export function whereabouts(method: string, params: unknown): Whereabouts {
  const read = Addressed.safeParse(params);
  if (!read.success) return { method };
  const { threadId, turnId = read.data.turn?.id } = read.data;
  return { method, ...(threadId ? { threadId } : {}), ...(turnId ? { turnId } : {}) };
}

// ---------------------------------------------------------------------------------------------
// The replies

const turnChecks = definitionChecks("Turn");

/** A turn of a reply checked against the schema, with the items the snapshot reads (user and agent messages). */
const CheckedTurn = z.unknown().superRefine((value, ctx) => {
  const read = turnChecks.read(value);
  if (!read.ok) {
    for (const issue of read.error.issues.slice(0, 3))
      ctx.addIssue({ code: "custom", path: issue.path, message: issue.message });
    return;
  }
  const { items } = read.value as { items: Array<{ type: string }> };
  items.forEach((item, i) => {
    if (item.type !== "userMessage" && item.type !== "agentMessage") return;
    const checked = itemChecks.get(item.type)!.read(item);
    if (!checked.ok) ctx.addIssue({ code: "custom", path: ["items", i], message: checked.error.issues[0]!.message });
  });
});

/** What the adapter reads of `thread/start`, `thread/resume` and `thread/fork` (the thread, its model and effort). */
const OpenedThread = z.looseObject({
  thread: z.looseObject({ id: z.string().min(1) }),
  model: z.string(),
  reasoningEffort: z.string().min(1).nullish(),
});

/**
 * The replies the adapter reads, checked where it reads them; calls whose reply it does not read are absent. A
 * policy of `config/read` is handed back to the binary that gave it (a newer one's included): only its kind is checked.
 */
const REPLIES: { readonly [M in keyof CodexCalls]?: z.ZodType } = {
  initialize: z.looseObject({ userAgent: z.string() }),
  "thread/start": OpenedThread,
  "thread/resume": OpenedThread,
  "thread/fork": OpenedThread,
  "turn/start": z.looseObject({ turn: CheckedTurn }),
  "thread/read": z.looseObject({ thread: z.looseObject({ turns: z.array(CheckedTurn) }) }),
  "config/read": z.looseObject({
    config: z.looseObject({
      approval_policy: z.union([z.string().min(1), z.looseObject({ granular: z.looseObject({}) })]).nullish(),
    }),
  }),
};

/** A reply as the adapter reads it, or a ProtocolError naming the call and what did not match. */
export function checkReply(method: string, result: unknown): unknown {
  const schema = Object.hasOwn(REPLIES, method) ? REPLIES[method as keyof CodexCalls] : undefined;
  if (!schema) return result;
  const parsed = schema.safeParse(result);
  if (parsed.success) return result;
  const issues = parsed.error.issues.slice(0, 3).map((i) => `${i.path.join(".") || "(result)"}: ${i.message}`);
  throw new ProtocolError(`codex ${method} answered a reply that does not match its schema: ${issues.join("; ")}`, {
    method,
  });
}
