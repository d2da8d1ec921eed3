import type { DomainEvent } from "../domain/events.js";
import type { LogRecord } from "../runtime/store/eventLog.js";

/** Renders the event stream as a readable terminal transcript (streamed text inline). */

const dim = (s: string) => `\x1b[2m${s}\x1b[22m`;
const bold = (s: string) => `\x1b[1m${s}\x1b[22m`;

export class TranscriptPrinter {
  #open: string | null = null;
  #kinds = new Map<string, string>();

  constructor(
    private readonly write: (text: string) => void,
    private readonly color = true,
  ) {}

  #line(text: string): void {
    if (this.#open) this.write("\n");
    this.#open = null;
    this.write(`${this.color ? text : strip(text)}\n`);
  }

  print({ event }: LogRecord<DomainEvent>): void {
    switch (event.type) {
      case "run.created":
        return this.#line(`\n${bold("you")} ${event.text}${event.mode === "queue" ? dim("  (queued)") : ""}`);
      case "run.state":
        if (event.status === "waiting") this.#line(dim("  … waiting for you"));
        return;
      case "run.terminal":
        return this.#line(dim(`  ■ run ${event.status}${event.reason ? ` (${event.reason})` : ""}`));
      case "node.started":
        this.#kinds.set(event.nodeId, event.kind);
        if (event.kind === "command_execution") return this.#line(`  $ ${event.detail?.command ?? ""}`);
        if (event.kind === "tool_call") return this.#line(`  ⚙ ${event.detail?.toolName ?? "tool"}`);
        if (event.kind === "file_change") return this.#line(`  ✎ ${event.detail?.path ?? "file"}`);
        if (event.kind === "subagent") return this.#line(`  ↳ subagent ${event.detail?.toolName ?? ""}`);
        return;
      case "node.delta": {
        const kind = this.#kinds.get(event.nodeId);
        if (kind !== "assistant_message" && kind !== "reasoning") return;
        if (this.#open !== event.nodeId) {
          this.#line(kind === "reasoning" ? dim("  thinking:") : bold("agent"));
          this.write(kind === "reasoning" ? "  " : "  ");
          this.#open = event.nodeId;
        }
        this.write(kind === "reasoning" ? (this.color ? dim(event.delta) : event.delta) : event.delta);
        return;
      }
      case "node.completed": {
        const kind = this.#kinds.get(event.nodeId);
        if ((kind === "command_execution" || kind === "tool_call") && event.output)
          this.#line(dim(`    ${event.output.trim()}`));
        if (event.status === "declined") this.#line(dim("    (declined)"));
        return;
      }
      case "todo.updated":
        return this.#line(
          [
            "  todo:",
            ...event.items.map(
              (i) => `    ${i.status === "completed" ? "☑" : i.status === "in_progress" ? "▸" : "☐"} ${i.text}`,
            ),
          ].join("\n"),
        );
      case "plan.proposed":
        return this.#line(`  plan: ${event.text}`);
      case "request.opened":
        return this.#line(`  ? approval requested: ${describe(event.payload)}`);
      case "request.resolved":
        return this.#line(dim(`    → ${event.response?.kind === "decision" ? event.response.decision : "answered"}`));
      case "interrupt.requested":
        return this.#line(dim("  ✋ interrupt requested"));
      case "interrupt.acknowledged":
        return this.#line(dim("  ✋ interrupt acknowledged (waiting for the provider's terminal)"));
      case "policy.applied":
        return this.#line(dim(`  ⚑ policy ${event.policy}: ${event.detail}`));
      case "warning":
        return this.#line(`  ! ${event.message}`);
      default:
        return;
    }
  }

  end(): void {
    if (this.#open) this.write("\n");
    this.#open = null;
  }
}

export function describe(payload: Extract<DomainEvent, { type: "request.opened" }>["payload"]): string {
  switch (payload.kind) {
    case "command":
      return `run \`${payload.command}\``;
    case "file_change":
      return `change ${payload.path}`;
    case "file_read":
      return `read ${payload.path}`;
    case "apply_patch":
      return "apply a patch";
    case "user_input":
      return payload.questions.map((q) => q.question).join(" / ");
    case "dynamic_tool":
      return `call ${payload.toolName}`;
    case "tool_approval":
      return `use ${payload.toolName}`;
    case "plan_approval":
      return "carry out the proposed plan";
  }
}

function strip(text: string): string {
  return text.replace(/\x1b\[[0-9;]*m/g, "");
}
