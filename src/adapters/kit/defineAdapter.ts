import type { ProviderCapabilities } from "../../capabilities/schema.js";
import { InvalidInputError } from "../../domain/errors.js";
import type { ProviderAdapter } from "../contract.js";

/**
 * The link from a declared capability to the method that serves it. A record that claims a capability without its
 * method does not type-check where the record is literal (`defineAdapter`), and fails when the adapter opens or a
 * session announces it (`unservedCapabilities`): the seed's rule, "do not advertise a capability until it is
 * verified", made mechanical for the part a machine can check.
 */
export const SERVED_BY = {
  "turns.supportsActiveSteering": "steerRun",
  "threads.canReadThreadSnapshot": "readThreadSnapshot",
  "threads.canRollbackThread": "rollbackThread",
  "threads.canForkThread": "forkThread",
  "context.canGenerateSummaries": "summarize",
  "subagents.canWaitForSubagents": "waitForSubagent",
  "subagents.canCloseSubagents": "closeSubagent",
  "sessions.pendingRequestsSurviveRestart": "reattachSession",
} as const satisfies Record<string, keyof ProviderAdapter>;

type Served = typeof SERVED_BY;

/** The value a record type gives a dotted field (`never` where it has no such field). */
type FieldOf<C, P extends string> = P extends `${infer G}.${infer F}`
  ? G extends keyof C
    ? F extends keyof C[G]
      ? C[G][F]
      : never
    : never
  : never;

/** The methods a record type requires: those whose capability it declares literally `true`. */
export type RequiredMethods<C> = {
  [P in keyof Served]: [FieldOf<C, P>] extends [true] ? Served[P] : never;
}[keyof Served];

/** An adapter whose record type declares capabilities: it has the method serving each. */
export type Serving<C> = { [M in RequiredMethods<C>]-?: NonNullable<ProviderAdapter[M]> };

/**
 * An adapter declaring records of type `C`: `getCapabilities()` returns a `C`, and it has the method serving each
 * capability `C` declares literally `true`. A shipped adapter's type is one (its record typed as it declares it), so
 * `defineAdapter` holds it to its record.
 */
export type AdapterDeclaring<C extends ProviderCapabilities> = Omit<ProviderAdapter, "getCapabilities"> & {
  getCapabilities(): C;
} & Serving<C>;

/** Each capability the record declares whose method the adapter lacks, as `field → method`. */
export function unservedCapabilities(
  adapter: ProviderAdapter,
  caps: ProviderCapabilities,
): Array<{ capability: string; method: string }> {
  return Object.entries(SERVED_BY).flatMap(([capability, method]) => {
    const [group, field] = capability.split(".") as [keyof ProviderCapabilities, string];
    const declared = (caps[group] as unknown as Record<string, unknown>)[field] === true;
    return declared && typeof adapter[method] !== "function" ? [{ capability, method }] : [];
  });
}

/** Each unserved capability with the method it lacks, for a message. */
export function describeUnserved(unserved: ReadonlyArray<{ capability: string; method: string }>): string {
  return unserved.map((u) => `${u.capability} (no ${u.method})`).join(", ");
}

/** Fails, typed, naming each capability the record declares without the method that serves it. */
export function assertServed(adapter: ProviderAdapter, caps: ProviderCapabilities, where: string): void {
  const unserved = unservedCapabilities(adapter, caps);
  if (unserved.length === 0) return;
  throw new InvalidInputError(
    `${where}.${unserved[0]!.capability}`,
    `the ${adapter.provider} adapter declares what it cannot serve: ${describeUnserved(unserved)}`,
  );
}

/**
 * An adapter, checked: where its record type is literal, claiming a capability without the method that serves it is
 * a type error (`supportsActiveSteering: true` without `steerRun`); whatever its type, the same check runs now, and the
 * runtime runs it again on every record a session announces.
 */
export function defineAdapter<C extends ProviderCapabilities, A extends ProviderAdapter & Serving<C>>(
  adapter: A & { getCapabilities(): C },
): A {
  assertServed(adapter, adapter.getCapabilities(), "capabilities");
  return adapter;
}
