import { maskCredentials } from "./credentials.js";
import type { DomainEvent, DomainEventOf, DomainEventType } from "./events.js";
import { MaskedStreams } from "./maskedStreams.js";

/**
 * What the log keeps of text a provider or a script sent: masked (src/domain/credentials.ts) before it is stored, so
 * the log, the projection snapshot and its text file, the read models and subscribers never hold a credential a
 * provider printed or failed with. The dispatcher stores every event through `ProviderTextMasking`: the one choke
 * point, whatever made the event (the normalizer, a machine, an effect, recovery).
 *
 * What the user typed is kept as typed (a prompt, a steer, a title, an answer): it is the user's to show, and a
 * masked prompt would change what a retry or a handoff sends. Ids, enums and the runtime's own names carry no
 * provider text; a request's question ids neither are masked (Claude keys answers by the question's text: a masked id
 * could not be answered).
 */

/** How one event type's provider text is masked: a function, `streamed` (node deltas), or null (it carries none). */
type Masking<T extends DomainEventType> = ((event: DomainEventOf<T>) => DomainEventOf<T>) | "streamed" | null;

const mask = maskCredentials;
const maskOrNull = (text: string | null): string | null => (text === null ? null : mask(text));

/** Every string in `value`, at any depth, masked; object keys in `keep` (and every key) as they are. */
function maskDeep<V>(value: V, keep: ReadonlySet<string> = NO_KEYS): V {
  if (typeof value === "string") return mask(value) as V;
  if (Array.isArray(value)) return value.map((v: unknown) => maskDeep(v, keep)) as V;
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) out[key] = keep.has(key) ? v : maskDeep(v, keep);
    return out as V;
  }
  return value;
}
const NO_KEYS: ReadonlySet<string> = new Set();
/** A request's kind, and its questions' ids (answers are keyed by them). */
const REQUEST_KEYS: ReadonlySet<string> = new Set(["kind", "id"]);

/**
 * Per event type, where provider text sits. Typed over every event type: a new one does not compile until it says
 * whether it carries provider text (and test/chaos/secrets.test.ts sends the corpus through each one that does).
 */
export const PROVIDER_TEXT: { readonly [T in DomainEventType]: Masking<T> } = {
  "thread.created": null, // title and cwd: the user's
  "run.created": null, // the user's prompt
  "run.state": null,
  "run.terminal": (e) => ({
    ...e,
    reason: maskOrNull(e.reason),
    failure: e.failure && {
      ...e.failure,
      failureClass: mask(e.failure.failureClass),
      message: mask(e.failure.message),
    },
  }),
  "attempt.started": null, // the prompt or the steer: the user's
  "attempt.turn_bound": null,
  "attempt.terminal": null,
  "node.started": (e) => (e.detail === null ? e : { ...e, detail: maskDeep(e.detail) }),
  "node.delta": "streamed",
  "node.completed": (e) => ({ ...e, text: maskOrNull(e.text), output: maskOrNull(e.output) }),
  "plan.updated": (e) => ({
    ...e,
    explanation: maskOrNull(e.explanation),
    steps: e.steps.map((s) => ({ ...s, step: mask(s.step) })),
  }),
  "plan.proposed": (e) => ({ ...e, text: mask(e.text) }),
  "todo.updated": (e) => ({ ...e, items: e.items.map((i) => ({ ...i, text: mask(i.text) })) }),
  "request.opened": (e) => ({ ...e, payload: maskDeep(e.payload, REQUEST_KEYS) }),
  // A user's answers are theirs; a tool's result (the embedder's code) and a provider's own answer are not.
  "request.resolved": (e) =>
    e.response === null || (e.by === "user" && e.response.kind === "answers")
      ? e
      : { ...e, response: maskDeep(e.response, REQUEST_KEYS) },
  "request.closed": (e) => ({ ...e, reason: mask(e.reason) }),
  "interrupt.requested": null,
  "interrupt.acknowledged": null,
  "interrupt.failed": (e) => ({ ...e, reason: mask(e.reason) }),
  "steer.applied": null, // the user's
  "policy.applied": (e) => ({ ...e, detail: mask(e.detail) }),
  "event.fenced": null,
  "session.started": null,
  "session.state": (e) => ({ ...e, message: maskOrNull(e.message) }),
  "provider_thread.bound": null, // a resume cursor is the provider's opaque handle: masked, it would resume nothing
  "provider_thread.closed": null,
  // A summary the provider wrote; the runtime's own is made of the log's (masked) texts and the user's prompts.
  "handoff.created": (e) => (e.summarizedBy === "provider" ? { ...e, text: mask(e.text) } : e),
  "fork.recorded": null,
  "fork.resolved": (e) => ({ ...e, detail: mask(e.detail) }),
  "thread.model_changed": null,
  "thread.mode_changed": null,
  "checkpoint.captured": null,
  "checkpoint.failed": (e) => ({ ...e, message: mask(e.message) }),
  "checkpoint.skipped": (e) => ({ ...e, reason: mask(e.reason) }),
  "rollback.started": null,
  "checkpoint.restore_started": null,
  "checkpoint.restore_settled": (e) => ({ ...e, message: mask(e.message) }),
  "rollback.applied": null,
  "subagent.thread_bound": null,
  "subagent.close_requested": null,
  warning: (e) => ({ ...e, message: mask(e.message) }),
  "command.receipt": null,
  "runtime.recovered": null,
};

const STREAMS = ["text", "output"] as const;
type Stream = (typeof STREAMS)[number];
const streamKey = (stream: Stream, nodeId: string) => `${stream}:${nodeId}`;

/**
 * Events as the log stores them. Stateful for node deltas (MaskedStreams): a delta stores what its item's masked text
 * gained, possibly nothing yet; the item's completion first stores what was held back as one last delta, so the
 * stored deltas put together are its whole masked text (a client reads an item's text from its deltas). Should the
 * masked text ever fail to grow by appends, the completion carries the whole masked text instead. A run's end gives
 * out what its items that never completed still held.
 */
export class ProviderTextMasking {
  #streams = new MaskedStreams();

  /** Hands `store` the events to keep for `event`, in order: none, one, or what a stream still owed then `event`. */
  store(event: DomainEvent, store: (event: DomainEvent) => void): void {
    switch (event.type) {
      case "node.delta": {
        const delta = this.#streams.delta(streamKey(event.stream, event.nodeId), event.runId, event.delta);
        if (delta !== "") store(delta === event.delta ? event : { ...event, delta });
        return;
      }
      case "node.completed":
        return store(this.#completed(event, store));
      case "run.terminal":
        for (const [key, end] of this.#streams.endGroup(event.runId)) {
          const colon = key.indexOf(":");
          const owed = { stream: key.slice(0, colon) as Stream, nodeId: key.slice(colon + 1) };
          if (end.rest)
            store({ type: "node.delta", threadId: event.threadId, runId: event.runId, ...owed, delta: end.rest });
        }
        return store(masked(event));
      default:
        return store(masked(event));
    }
  }

  #completed(event: DomainEventOf<"node.completed">, store: (event: DomainEvent) => void): DomainEvent {
    let completed = masked(event);
    for (const stream of STREAMS) {
      const end = this.#streams.end(streamKey(stream, event.nodeId));
      if (!end) continue;
      const { threadId, runId, nodeId } = event;
      if (end.rest !== null && end.rest !== "")
        store({ type: "node.delta", threadId, runId, nodeId, stream, delta: end.rest });
      // The completion's own text, masked, replaces the deltas' in the read model; without one, it carries theirs.
      else if (end.rest === null && event[stream] === null) completed = { ...completed, [stream]: end.whole };
    }
    return completed;
  }
}

/** `event` with its provider text masked (a node delta aside: see `ProviderTextMasking`). */
export function masked<E extends DomainEvent>(event: E): E {
  const masking = PROVIDER_TEXT[event.type] as unknown as ((event: E) => E) | "streamed" | null;
  return typeof masking === "function" ? masking(event) : event;
}
