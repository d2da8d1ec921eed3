/**
 * The Claude host: one process per Claude target, run by the runtime's host supervisor. It
 * drives the Claude Agent SDK (one SDK query, with streaming input, per provider thread:
 * `threads.ts`) and speaks JSON-RPC over stdio with the runtime (`../transport.ts`): calls in,
 * each checked against its schema, `event` notifications out.
 * Permission prompts (`canUseTool`) become runtime requests answered with `respond`, unless the turn's runtime mode
 * refuses them unasked (`permissions.ts`, `modes.ts`).
 */
import { createInterface } from "node:readline";
import { ProtocolError } from "../../../domain/errors.js";
import { errorResponse, notification, parseMessage, result } from "../../kit/jsonRpc.js";
import { HOST_CALLS, type HostMethod, type HostParams, type HostResult } from "../transport.js";
import { interrupt, turnAlive } from "./interrupts.js";
import { respond } from "./permissions.js";
import { send } from "./thread.js";
import { closeAll, closeThreads, init, openOne, openThread, rollback, sendTurn, thread } from "./threads.js";

type Handlers = { [M in HostMethod]: (params: HostParams<M>) => Promise<HostResult<M>> | HostResult<M> };

const handlers: Handlers = {
  init: (params) => (init(params), null),
  openThread: async (params) => ({ cursor: await openThread(params) }),
  send: async (params) => (await sendTurn(params), null),
  turnAlive: ({ cursor }) => ({ alive: turnAlive(openOne(cursor)) }),
  interrupt: async ({ cursor }) => (await interrupt(thread(cursor)), null),
  respond: (params) => (respond(params), null),
  rollback: async (params) => ({ cursor: await rollback(params) }),
  closeThreads: ({ sessionId }) => (closeThreads(sessionId), null),
};

async function handle(method: string, params: unknown): Promise<unknown> {
  if (!Object.hasOwn(HOST_CALLS, method)) throw new ProtocolError(`claude host: unknown method ${method}`);
  const call = method as HostMethod;
  const parsed = HOST_CALLS[call].params.safeParse(params ?? {});
  if (!parsed.success)
    throw new ProtocolError(`claude host: ${call} params: ${parsed.error.issues[0]?.message ?? "invalid"}`);
  return (handlers[call] as (p: unknown) => unknown)(parsed.data);
}

createInterface({ input: process.stdin })
  .on("line", (line) => {
    const message = parseMessage(line);
    if (!message || !("method" in message) || !("id" in message)) return;
    handle(message.method, message.params).then(
      (value) => send(result(message.id as number, value)),
      (error: unknown) => send(errorResponse(message.id as number, error)),
    );
  })
  .on("close", () => {
    closeAll();
    process.exit(0);
  });
process.on("SIGTERM", () => {
  closeAll();
  process.exit(0);
});
send(notification("host.ready", { pid: process.pid, protocol: 1 }));
