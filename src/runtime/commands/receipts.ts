import type { DomainEvent } from "../../domain/events.js";
import { ConflictError } from "../../domain/errors.js";
import type { IdSource } from "../../domain/ids.js";
import type { Dispatcher } from "../dispatch.js";
import type { EventLog } from "../store/eventLog.js";
import { assertOpen } from "./checks.js";

/**
 * Every command gets an id and a durable receipt: repeating the id returns the receipt and
 * nothing runs twice. A command still in flight is known by its id too: a second caller with
 * the same id (even inside one `Promise.all`) awaits the first one's receipt or error.
 */
export class CommandReceipts {
  /** Commands in flight by id (their receipt is not committed yet). */
  readonly #inflight = new Map<string, { command: string; done: Promise<object> }>();

  constructor(
    private readonly d: Dispatcher,
    private readonly log: EventLog<DomainEvent>,
    private readonly ids: IdSource,
  ) {}

  async run<R extends object>(
    commandId: string | undefined,
    command: string,
    fn: () => R | Promise<R>,
  ): Promise<R & { commandId: string }> {
    assertOpen(this.d);
    if (commandId) {
      const running = this.#inflight.get(commandId) ?? this.d.views.receipts.get(commandId);
      if (running) {
        if (running.command !== command)
          throw new ConflictError(`command id ${commandId} was used for ${running.command}`, { commandId });
        const receipt = "done" in running ? await running.done : running.receipt;
        await this.log.whenDurable();
        return structuredClone(receipt) as R & { commandId: string };
      }
    }
    const id = commandId ?? this.ids.next("cmd");
    const done = (async () => {
      const receipt = { commandId: id, ...(await fn()) };
      assertOpen(this.d);
      this.d.run(() => this.d.commit({ type: "command.receipt", commandId: id, command, receipt }));
      await this.log.whenDurable();
      return receipt;
    })();
    // Registered before the first await of `fn`, so a concurrent caller always finds it.
    this.#inflight.set(id, { command, done });
    try {
      return await done;
    } finally {
      this.#inflight.delete(id);
    }
  }
}
