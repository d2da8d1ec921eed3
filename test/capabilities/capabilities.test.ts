import { describe, expect, expectTypeOf, it } from "vitest";
import type { z } from "zod";
import {
  CAPABILITY_RECORD_VERSION,
  ProviderCapabilitiesSchema,
  defineCapabilities,
  fullCapabilities,
  minimalCapabilities,
  parseCapabilities,
} from "../../src/capabilities/index.js";
import * as predicates from "../../src/capabilities/predicates.js";
import type {
  CapabilityGroup,
  CapabilityOverrides,
  FullCapabilities,
  ProviderCapabilities,
} from "../../src/capabilities/index.js";
import type { ApprovalKind } from "../../src/domain/items.js";
import { InvalidInputError } from "../../src/domain/errors.js";

/* ------------------------------------------------------------------------------------------
 * The seed (shared/seeds/provider-capability-system.md), written out field for field.
 * ---------------------------------------------------------------------------------------- */

type FieldType = "boolean" | "strength" | "number|null";
const B = "boolean" as const;
const S = "strength" as const;
const N = "number|null" as const;

const SEED: Record<CapabilityGroup, Record<string, FieldType>> = {
  sessions: {
    supportsMultipleProviderThreadsPerSession: B,
    supportsModelSwitchInSession: B,
    supportsProviderSwitchingViaHandoff: B,
    supportsRuntimeModeSwitchInSession: B,
    pendingRequestsSurviveRestart: B,
  },
  threads: {
    canCreateEmptyThread: B,
    canReadThreadSnapshot: B,
    canRollbackThread: B,
    canForkThread: B,
    canForkFromTurn: B,
    canForkFromSubagentThread: B,
    exposesNativeThreadId: B,
  },
  turns: {
    exposesNativeTurnId: B,
    emitsTurnStarted: B,
    emitsTurnCompleted: B,
    supportsInterrupt: B,
    supportsActiveSteering: B,
    supportsSteeringByInterruptRestart: B,
    supportsQueuedMessages: B,
    terminalStatusQuality: S,
  },
  streaming: {
    streamsAssistantText: B,
    streamsReasoning: B,
    streamsToolOutput: B,
    streamsPlanText: B,
    emitsMessageCompleted: B,
  },
  tools: {
    exposesToolItemIds: B,
    emitsToolStarted: B,
    emitsToolCompleted: B,
    emitsToolOutput: B,
    supportsMcpTools: B,
    supportsDynamicToolCallbacks: B,
  },
  approvals: {
    supportsCommandApproval: B,
    supportsFileReadApproval: B,
    supportsFileChangeApproval: B,
    supportsApplyPatchApproval: B,
    approvalsHaveNativeRequestIds: B,
    approvalCallbacksAreLiveOnly: B,
    approvalsCanOriginateFromSubagents: B,
  },
  planning: {
    emitsPlanUpdated: B,
    emitsTodoList: B,
    emitsProposedPlan: B,
    supportsStructuredQuestions: B,
    planDeltasHaveItemIds: B,
  },
  subagents: {
    supportsSubagents: B,
    exposesSubagentThreadIds: B,
    emitsSubagentLifecycle: B,
    canWaitForSubagents: B,
    canCloseSubagents: B,
    canForkSubagentThread: B,
  },
  context: {
    acceptsSystemContext: B,
    acceptsDeveloperContext: B,
    acceptsSyntheticUserContext: B,
    canGenerateSummaries: B,
    canConsumeHandoffSummaries: B,
    supportsDeltaHandoff: B,
    supportsFullThreadHandoff: B,
    maxRecommendedHandoffChars: N,
  },
  checkpointing: {
    appCanCheckpointFilesystem: B,
    supportsNestedCheckpointScopes: B,
    providerCanRollbackConversation: B,
    providerRollbackReturnsSnapshot: B,
    providerCanReadConversationSnapshot: B,
  },
  identity: {
    nativeThreadIds: S,
    nativeTurnIds: S,
    nativeItemIds: S,
    nativeRequestIds: S,
  },
};

const GROUPS = Object.keys(SEED) as CapabilityGroup[];

/** Values each seed type must accept and reject. */
const ACCEPTS: Record<FieldType, unknown[]> = {
  boolean: [true, false],
  strength: ["strong", "weak", "none"],
  "number|null": [null, 1, 8_000, 16_000],
};
const REJECTS: Record<FieldType, unknown[]> = {
  boolean: ["true", "yes", 1, 0, null, undefined, {}],
  strength: ["medium", "Strong", "", true, null, undefined, 1],
  "number|null": ["8000", true, undefined, {}, Number.NaN],
};

function groupShape(group: CapabilityGroup): Record<string, z.ZodType> {
  return ProviderCapabilitiesSchema.shape[group].shape as unknown as Record<string, z.ZodType>;
}

/** A deep, freely mutable copy of the full preset, for breaking on purpose. */
function mutableFull(): Record<string, Record<string, unknown>> & { version: unknown } {
  return structuredClone(fullCapabilities()) as unknown as Record<string, Record<string, unknown>> & {
    version: unknown;
  };
}

function catchError(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to throw");
}

function expectInvalid(record: unknown, field: string): InvalidInputError {
  const error = catchError(() => parseCapabilities(record));
  expect(error).toBeInstanceOf(InvalidInputError);
  const invalid = error as InvalidInputError;
  expect(invalid.code).toBe("invalid_input");
  expect(invalid.field).toBe(field);
  expect(invalid.details.field).toBe(field);
  expect(invalid.message).toContain(field);
  return invalid;
}

/* ------------------------------------------------------------------------------------------ */

describe("ProviderCapabilitiesSchema matches the seed", () => {
  it("has exactly the eleven seed groups plus version", () => {
    expect(GROUPS).toHaveLength(11);
    expect(Object.keys(ProviderCapabilitiesSchema.shape).sort()).toEqual([...GROUPS, "version"].sort());
  });

  it.each(GROUPS)("group %s has exactly the seed's fields", (group) => {
    expect(Object.keys(groupShape(group)).sort()).toEqual(Object.keys(SEED[group]).sort());
  });

  const fields = GROUPS.flatMap((group) =>
    Object.entries(SEED[group]).map(([field, type]) => ({ path: `${group}.${field}`, group, field, type })),
  );

  it.each(fields)("$path has the seed's type ($type)", ({ group, field, type }) => {
    const schema = groupShape(group)[field];
    expect(schema).toBeDefined();
    for (const value of ACCEPTS[type]) expect(schema!.safeParse(value).success, `accepts ${String(value)}`).toBe(true);
    for (const value of REJECTS[type]) expect(schema!.safeParse(value).success, `rejects ${String(value)}`).toBe(false);
  });

  it("version is the literal record version", () => {
    const version = ProviderCapabilitiesSchema.shape.version;
    expect(CAPABILITY_RECORD_VERSION).toBe(1);
    expect(version.safeParse(CAPABILITY_RECORD_VERSION).success).toBe(true);
    for (const bad of [0, 2, "1", null, undefined]) expect(version.safeParse(bad).success).toBe(false);
  });
});

describe("parseCapabilities", () => {
  it("accepts a valid record and returns it unchanged", () => {
    const full = fullCapabilities();
    expect(parseCapabilities(full)).toEqual(full);
    const withNull = mutableFull();
    withNull.context!.maxRecommendedHandoffChars = null;
    expect(parseCapabilities(withNull).context.maxRecommendedHandoffChars).toBeNull();
  });

  it("rejects a wrong field type, naming the field", () => {
    const record = mutableFull();
    record.turns!.supportsInterrupt = "yes";
    expectInvalid(record, "turns.supportsInterrupt");
  });

  it("rejects a missing field, naming the field", () => {
    const record = mutableFull();
    delete record.turns!.supportsInterrupt;
    expectInvalid(record, "turns.supportsInterrupt");

    const deepest = mutableFull();
    delete deepest.identity!.nativeRequestIds;
    expectInvalid(deepest, "identity.nativeRequestIds");
  });

  it("rejects a missing group, naming the group", () => {
    const record = mutableFull();
    delete record.planning;
    expectInvalid(record, "planning");
  });

  it("rejects an unknown extra field inside a group, naming it", () => {
    const record = mutableFull();
    record.turns!.supportsTimeTravel = true;
    expectInvalid(record, "turns.supportsTimeTravel");
  });

  it("rejects an unknown extra top-level key, naming it", () => {
    const record = mutableFull() as Record<string, unknown>;
    record.telepathy = { enabled: true };
    expectInvalid(record, "telepathy");
  });

  it("rejects a wrong or missing version", () => {
    for (const version of [2, 0, "1", null]) {
      const record = mutableFull();
      record.version = version;
      expectInvalid(record, "version");
    }
    const missing = mutableFull() as Record<string, unknown>;
    delete missing.version;
    expectInvalid(missing, "version");
  });

  it("rejects a bad enum value, naming the field", () => {
    const record = mutableFull();
    record.identity!.nativeItemIds = "medium";
    expectInvalid(record, "identity.nativeItemIds");

    const quality = mutableFull();
    quality.turns!.terminalStatusQuality = "excellent";
    expectInvalid(quality, "turns.terminalStatusQuality");
  });

  it("rejects a negative, zero or fractional maxRecommendedHandoffChars", () => {
    for (const value of [-1, 0, 1.5]) {
      const record = mutableFull();
      record.context!.maxRecommendedHandoffChars = value;
      expectInvalid(record, "context.maxRecommendedHandoffChars");
    }
  });

  it("rejects something that is not a record at all with an InvalidInputError", () => {
    for (const value of [null, undefined, "caps", 42, []]) {
      const error = catchError(() => parseCapabilities(value));
      expect(error).toBeInstanceOf(InvalidInputError);
      expect((error as InvalidInputError).code).toBe("invalid_input");
    }
  });
});

describe("defineCapabilities", () => {
  it("without overrides is the full preset", () => {
    expect(defineCapabilities()).toEqual(fullCapabilities());
    expect(defineCapabilities({})).toEqual(fullCapabilities());
  });

  it("merges overrides per group, keeping the group's other fields and the other groups", () => {
    const full = fullCapabilities();
    const caps = defineCapabilities({
      turns: { supportsActiveSteering: false, terminalStatusQuality: "weak" },
      identity: { nativeItemIds: "none" },
    });
    expect(caps.turns).toEqual({ ...full.turns, supportsActiveSteering: false, terminalStatusQuality: "weak" });
    expect(caps.identity).toEqual({ ...full.identity, nativeItemIds: "none" });
    for (const group of GROUPS.filter((g) => g !== "turns" && g !== "identity")) {
      expect(caps[group], group).toEqual(full[group]);
    }
    expect(caps.version).toBe(CAPABILITY_RECORD_VERSION);
  });

  it("merges onto a given base without mutating it", () => {
    const base = minimalCapabilities();
    const before = structuredClone(base);
    const caps = defineCapabilities(
      { streaming: { streamsReasoning: true }, context: { maxRecommendedHandoffChars: null } },
      base,
    );
    expect(caps.streaming).toEqual({ ...before.streaming, streamsReasoning: true });
    expect(caps.context).toEqual({ ...before.context, maxRecommendedHandoffChars: null });
    expect(caps.turns).toEqual(before.turns);
    expect(base).toEqual(before);
  });

  it("validates the merged record", () => {
    const wrongType = catchError(() =>
      defineCapabilities({ turns: { supportsInterrupt: "yes" as unknown as boolean } }),
    );
    expect(wrongType).toBeInstanceOf(InvalidInputError);
    expect((wrongType as InvalidInputError).field).toBe("turns.supportsInterrupt");

    const unknownField = catchError(() =>
      defineCapabilities({ turns: { supportsTimeTravel: true } as unknown as CapabilityOverrides["turns"] }),
    );
    expect(unknownField).toBeInstanceOf(InvalidInputError);
    expect((unknownField as InvalidInputError).field).toBe("turns.supportsTimeTravel");

    const unknownGroup = catchError(() =>
      defineCapabilities({ telepathy: { on: true } } as unknown as CapabilityOverrides),
    );
    expect(unknownGroup).toBeInstanceOf(InvalidInputError);
    expect((unknownGroup as InvalidInputError).field).toBe("telepathy");

    const negative = catchError(() => defineCapabilities({ context: { maxRecommendedHandoffChars: -1 } }));
    expect(negative).toBeInstanceOf(InvalidInputError);
    expect((negative as InvalidInputError).field).toBe("context.maxRecommendedHandoffChars");
  });

  it("is typed with the fields its overrides set: literal where they are, the base's type elsewhere", () => {
    const caps = defineCapabilities({ turns: { supportsActiveSteering: false }, threads: { canForkThread: true } });
    expectTypeOf(caps.turns.supportsActiveSteering).toEqualTypeOf<false>();
    expectTypeOf(caps.threads.canForkThread).toEqualTypeOf<true>();
    // Not set: fullCapabilities()' type (literal where a method serves the field), else the schema's.
    expectTypeOf(caps.threads.canRollbackThread).toEqualTypeOf<true>();
    expectTypeOf(caps.turns.supportsInterrupt).toEqualTypeOf<boolean>();
    expectTypeOf(defineCapabilities()).toEqualTypeOf<FullCapabilities>();
    // Over a base typed by the schema, what the overrides leave is the schema's.
    const onMinimal = defineCapabilities({ turns: { supportsActiveSteering: true } }, minimalCapabilities());
    expectTypeOf(onMinimal.turns.supportsActiveSteering).toEqualTypeOf<true>();
    expectTypeOf(onMinimal.threads.canForkThread).toEqualTypeOf<boolean>();
    // Overrides known only by their type set nothing for sure.
    const wide: CapabilityOverrides = { turns: { supportsActiveSteering: false } };
    expectTypeOf(defineCapabilities(wide).turns.supportsActiveSteering).toEqualTypeOf<boolean>();
    // A field the record does not have, below a group, is still refused by type (and by the schema).
    // @ts-expect-error turns has no supportsTimeTravel
    expect(() => defineCapabilities({ turns: { supportsTimeTravel: true } })).toThrow(InvalidInputError);
    // @ts-expect-error nor a group the record does not have
    expect(() => defineCapabilities({ telepathy: { on: true } })).toThrow(InvalidInputError);
  });
});

describe("presets", () => {
  it("fullCapabilities parses and is a fresh object each call", () => {
    const full = fullCapabilities();
    expect(parseCapabilities(full)).toEqual(full);
    full.turns.supportsInterrupt = false;
    expect(fullCapabilities().turns.supportsInterrupt).toBe(true);
  });

  it("fullCapabilities exposes strong identities and active control", () => {
    const full = fullCapabilities();
    expect(full.identity).toEqual({
      nativeThreadIds: "strong",
      nativeTurnIds: "strong",
      nativeItemIds: "strong",
      nativeRequestIds: "strong",
    });
    expect(full.turns.supportsInterrupt).toBe(true);
    expect(full.turns.supportsActiveSteering).toBe(true);
    expect(full.turns.terminalStatusQuality).toBe("strong");
  });

  it("minimalCapabilities parses and describes a text-only provider without ids or control", () => {
    const min = minimalCapabilities();
    expect(parseCapabilities(min)).toEqual(min);
    expect(min.identity).toEqual({
      nativeThreadIds: "none",
      nativeTurnIds: "none",
      nativeItemIds: "none",
      nativeRequestIds: "none",
    });
    expect(min.turns.supportsInterrupt).toBe(false);
    expect(min.turns.supportsActiveSteering).toBe(false);
    expect(min.turns.emitsTurnCompleted).toBe(true);
    expect(min.streaming.streamsAssistantText).toBe(true);
    expect(Object.values(min.threads).every((v) => v === false)).toBe(true);
    expect(Object.values(min.approvals).every((v) => v === false)).toBe(true);
    expect(Object.values(min.planning).every((v) => v === false)).toBe(true);
    expect(Object.values(min.subagents).every((v) => v === false)).toBe(true);
  });
});

/* ------------------------------------------------------------------------------------------
 * Predicates: each row sets only the flags the predicate is about, on two very different
 * bases, so unrelated flags cannot change the decision.
 * ---------------------------------------------------------------------------------------- */

type Row = { overrides: CapabilityOverrides; expected: boolean; label: string };

function bools(n: number): boolean[][] {
  return Array.from({ length: 2 ** n }, (_, i) => Array.from({ length: n }, (_, bit) => ((i >> bit) & 1) === 1));
}

const BASES: Array<[string, () => ProviderCapabilities]> = [
  ["full", fullCapabilities],
  ["minimal", minimalCapabilities],
];

function check(predicate: (c: ProviderCapabilities) => boolean, rows: Row[]): void {
  for (const [baseName, base] of BASES) {
    for (const row of rows) {
      const caps = defineCapabilities(row.overrides, base());
      expect(predicate(caps), `${row.label} on ${baseName}`).toBe(row.expected);
    }
  }
}

/** Rows for a predicate that is exactly one flag. */
function single<G extends CapabilityGroup>(group: G, field: keyof ProviderCapabilities[G] & string): Row[] {
  return [true, false].map((value) => ({
    overrides: { [group]: { [field]: value } } as CapabilityOverrides,
    expected: value,
    label: `${group}.${field}=${value}`,
  }));
}

describe("capability predicates", () => {
  /** One test below per name. */
  const covered: Array<keyof typeof predicates> = [
    "approvalsOutliveConnection",
    "canSteerNatively",
    "canSteerByInterruptRestart",
    "canInterrupt",
    "interruptWaitsForTurnStart",
    "canQueueNatively",
    "canForkNatively",
    "canRollbackProvider",
    "canReadThreadSnapshot",
    "canVerifyProviderRollback",
    "canReadConversation",
    "sharesSessionAcrossThreads",
    "createsEmptyThreads",
    "reportsTurnTerminals",
    "canSwitchModelInSession",
    "canSwitchModeInSession",
    "requestsSurviveRestart",
    "mustInferTurnTerminal",
    "closesMessagesAtRootTerminal",
    "supportsApprovalFor",
    "hasStructuredApprovals",
    "switchesProvidersViaHandoff",
    "writesSummaries",
    "consumesHandoffSummaries",
    "takesDeltaHandoff",
    "takesFullThreadHandoff",
  ];

  it("canSteerNatively is turns.supportsActiveSteering", () => {
    check(predicates.canSteerNatively, single("turns", "supportsActiveSteering"));
  });

  it("canSteerByInterruptRestart needs restart-steering and interrupt", () => {
    check(
      predicates.canSteerByInterruptRestart,
      [
        [true, true, true],
        [true, false, false],
        [false, true, false],
        [false, false, false],
      ].map(([restart, interrupt, expected]) => ({
        overrides: { turns: { supportsSteeringByInterruptRestart: restart!, supportsInterrupt: interrupt! } },
        expected: expected!,
        label: `restart=${restart} interrupt=${interrupt}`,
      })),
    );
  });

  it("canInterrupt is turns.supportsInterrupt", () => {
    check(predicates.canInterrupt, single("turns", "supportsInterrupt"));
  });

  it("canQueueNatively is turns.supportsQueuedMessages", () => {
    check(predicates.canQueueNatively, single("turns", "supportsQueuedMessages"));
  });

  it("canForkNatively needs canForkThread, and canForkFromTurn when forking from inside a thread", () => {
    const table: Array<[fork: boolean, fromTurn: boolean, inside: boolean, expected: boolean]> = [
      [true, true, false, true],
      [true, true, true, true],
      [true, false, false, true],
      [true, false, true, false],
      [false, true, false, false],
      [false, true, true, false],
      [false, false, false, false],
      [false, false, true, false],
    ];
    for (const [fork, fromTurn, inside, expected] of table) {
      check(
        (c) => predicates.canForkNatively(c, inside),
        [
          {
            overrides: { threads: { canForkThread: fork, canForkFromTurn: fromTurn } },
            expected,
            label: `fork=${fork} fromTurn=${fromTurn} inside=${inside}`,
          },
        ],
      );
    }
  });

  it("canRollbackProvider needs the thread to allow it and the provider to roll its conversation back", () => {
    const rows: Row[] = bools(2).map(([thread, conversation]) => ({
      overrides: {
        threads: { canRollbackThread: thread! },
        checkpointing: { providerCanRollbackConversation: conversation! },
      },
      expected: thread! && conversation!,
      label: `thread=${thread} conversation=${conversation}`,
    }));
    check(predicates.canRollbackProvider, rows);
  });

  it("canReadThreadSnapshot is threads.canReadThreadSnapshot", () => {
    check(predicates.canReadThreadSnapshot, single("threads", "canReadThreadSnapshot"));
  });

  it("canReadConversation needs the conversation snapshot and a way to read it", () => {
    const rows: Row[] = bools(2).map(([conversation, read]) => ({
      overrides: {
        checkpointing: { providerCanReadConversationSnapshot: conversation! },
        threads: { canReadThreadSnapshot: read! },
      },
      expected: conversation! && read!,
      label: `conversation=${conversation} read=${read}`,
    }));
    check(predicates.canReadConversation, rows);
  });

  it("canVerifyProviderRollback by the snapshot the rollback returns, or by reading the conversation", () => {
    const rows: Row[] = bools(3).map(([returns, conversation, read]) => ({
      overrides: {
        checkpointing: {
          providerRollbackReturnsSnapshot: returns!,
          providerCanReadConversationSnapshot: conversation!,
        },
        threads: { canReadThreadSnapshot: read! },
      },
      expected: returns! || (conversation! && read!),
      label: `returns=${returns} conversation=${conversation} read=${read}`,
    }));
    check(predicates.canVerifyProviderRollback, rows);
  });

  it("sharesSessionAcrossThreads needs many threads per session, thread ids, reported terminals, empty threads", () => {
    const rows: Row[] = bools(5).map(([multi, exposes, ids, terminals, empty]) => ({
      overrides: {
        sessions: { supportsMultipleProviderThreadsPerSession: multi! },
        threads: { exposesNativeThreadId: exposes!, canCreateEmptyThread: empty! },
        identity: { nativeThreadIds: ids! ? "weak" : "none" },
        turns: { emitsTurnCompleted: terminals! },
      },
      expected: multi! && exposes! && ids! && terminals! && empty!,
      label: `multi=${multi} exposes=${exposes} ids=${ids} terminals=${terminals} empty=${empty}`,
    }));
    check(predicates.sharesSessionAcrossThreads, rows);
  });

  it("createsEmptyThreads is threads.canCreateEmptyThread", () => {
    check(predicates.createsEmptyThreads, single("threads", "canCreateEmptyThread"));
  });

  it("interruptWaitsForTurnStart is turns.emitsTurnStarted", () => {
    check(predicates.interruptWaitsForTurnStart, single("turns", "emitsTurnStarted"));
  });

  it("reportsTurnTerminals is turns.emitsTurnCompleted", () => {
    check(predicates.reportsTurnTerminals, single("turns", "emitsTurnCompleted"));
  });

  it("canSwitchModeInSession is sessions.supportsRuntimeModeSwitchInSession", () => {
    check(predicates.canSwitchModeInSession, single("sessions", "supportsRuntimeModeSwitchInSession"));
  });

  it("canSwitchModelInSession is sessions.supportsModelSwitchInSession", () => {
    check(predicates.canSwitchModelInSession, single("sessions", "supportsModelSwitchInSession"));
  });

  it("requestsSurviveRestart is sessions.pendingRequestsSurviveRestart", () => {
    check(predicates.requestsSurviveRestart, single("sessions", "pendingRequestsSurviveRestart"));
  });

  it("approvalsOutliveConnection unless approval callbacks are live only", () => {
    const rows = single("approvals", "approvalCallbacksAreLiveOnly").map((r) => ({ ...r, expected: !r.expected }));
    check(predicates.approvalsOutliveConnection, rows);
  });

  it("mustInferTurnTerminal unless the provider emits a strong terminal", () => {
    const rows: Row[] = [];
    for (const emits of [true, false]) {
      for (const quality of ["strong", "weak", "none"] as const) {
        rows.push({
          overrides: { turns: { emitsTurnCompleted: emits, terminalStatusQuality: quality } },
          expected: !(emits && quality === "strong"),
          label: `emitsTurnCompleted=${emits} quality=${quality}`,
        });
      }
    }
    check(predicates.mustInferTurnTerminal, rows);
  });

  it("closesMessagesAtRootTerminal when message completion is not emitted", () => {
    check(
      predicates.closesMessagesAtRootTerminal,
      single("streaming", "emitsMessageCompleted").map((r) => ({ ...r, expected: !r.expected })),
    );
  });

  it("supportsApprovalFor reads only the flag of the asked kind", () => {
    const flagOf: Record<ApprovalKind, keyof ProviderCapabilities["approvals"]> = {
      command: "supportsCommandApproval",
      file_read: "supportsFileReadApproval",
      file_change: "supportsFileChangeApproval",
      apply_patch: "supportsApplyPatchApproval",
    };
    const kinds = Object.keys(flagOf) as ApprovalKind[];
    for (const kind of kinds) {
      for (const bits of bools(kinds.length)) {
        const approvals = Object.fromEntries(kinds.map((k, i) => [flagOf[k], bits[i]!]));
        const expected = bits[kinds.indexOf(kind)]!;
        check(
          (c) => predicates.supportsApprovalFor(c, kind),
          [{ overrides: { approvals }, expected, label: `${kind} with ${JSON.stringify(approvals)}` }],
        );
      }
    }
  });

  it("hasStructuredApprovals when any approval kind is supported", () => {
    const flags = [
      "supportsCommandApproval",
      "supportsFileReadApproval",
      "supportsFileChangeApproval",
      "supportsApplyPatchApproval",
    ] as const;
    check(
      predicates.hasStructuredApprovals,
      bools(flags.length).map((bits) => {
        const approvals = Object.fromEntries(flags.map((f, i) => [f, bits[i]!]));
        return { overrides: { approvals }, expected: bits.some(Boolean), label: JSON.stringify(approvals) };
      }),
    );
  });

  it("the handoff predicates are their seed fields", () => {
    check(predicates.switchesProvidersViaHandoff, single("sessions", "supportsProviderSwitchingViaHandoff"));
    check(predicates.writesSummaries, single("context", "canGenerateSummaries"));
    check(predicates.consumesHandoffSummaries, single("context", "canConsumeHandoffSummaries"));
    check(predicates.takesDeltaHandoff, single("context", "supportsDeltaHandoff"));
    check(predicates.takesFullThreadHandoff, single("context", "supportsFullThreadHandoff"));
  });

  it("every exported predicate is covered above", () => {
    const exported = Object.entries(predicates)
      .filter(([, value]) => typeof value === "function")
      .map(([name]) => name)
      .sort();
    expect(exported).toEqual([...covered].sort());
  });
});
