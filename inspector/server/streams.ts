import { MaskedStreams } from "../../src/domain/maskedStreams.js";

type Event = { type: string; [key: string]: unknown };

const STREAMS = ["text", "output"] as const;

/**
 * Deltas as the page may see them. The log's deltas are masked already (the runtime masks what it stores the same
 * way), but a page may watch a log written before that, or by another producer: the hub masks them again, with the
 * one implementation of assembled-stream masking (src/domain/maskedStreams.ts, compiled beside the server by the
 * inspector's tsconfig). A page never gets a raw delta: it gets what the item's assembled text, masked as a whole,
 * gained up to its last whitespace; what was held back comes with the item's `node.completed`, as its whole text.
 */
export class AssembledStreams {
  #streams = new MaskedStreams();

  /** `event` as the page may see it: a `node.delta`'s text replaced as above, a completion given what was held. */
  apply<E extends Event>(event: E): E {
    switch (event.type) {
      case "node.delta": {
        const key = `${String(event.nodeId)}:${String(event.stream)}`;
        return { ...event, delta: this.#streams.delta(key, String(event.runId ?? ""), String(event.delta ?? "")) };
      }
      case "node.completed": {
        let completed = event;
        for (const stream of STREAMS) {
          const end = this.#streams.end(`${String(event.nodeId)}:${stream}`);
          // Held back and not in the completion: the page's item would miss its end.
          if (end && end.rest !== "" && event[stream] == null) completed = { ...completed, [stream]: end.whole };
        }
        return completed;
      }
      case "run.terminal":
        this.#streams.endGroup(String(event.runId ?? ""));
        return event;
      default:
        return event;
    }
  }
}
