import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { codexCapabilities } from "../../src/adapters/codex/capabilities.js";
import { createCodexAdapter } from "../../src/adapters/codex/adapter.js";
import { mapNotification } from "../../src/adapters/codex/mapper.js";
import { CODEX_SERVER_NOTIFICATIONS } from "../../src/adapters/codex/protocol/types.js";
import { parseNotification, parseServerRequest } from "../../src/adapters/codex/transport.js";
import { ProtocolError } from "../../src/domain/errors.js";
import { bindingsCheck, BINDINGS, generate, SNAPSHOT } from "../../scripts/codex-protocol.js";
import { openFaultRuntime } from "../faults/helpers.js";
import { codexBinary } from "./harness.js";

/**
 * The adapter against the pinned binary's own protocol description: the committed snapshot
 * reproduces, the bindings are what the script generates from it, the frames the adapter reads
 * are checked against it, every capability the record declares is exercised by a test, and a
 * missing binary fails loudly.
 */

const root = join(import.meta.dirname, "..", "..");
const protocol = join(root, "src", "adapters", "codex", "protocol");
const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");
type Definitions = Record<string, { properties?: Record<string, unknown>; enum?: string[]; oneOf?: unknown[] }>;
const snapshot = async () => {
  const { definitions } = JSON.parse(await readFile(join(protocol, SNAPSHOT), "utf8")) as {
    definitions: Definitions & { v2: Definitions };
  };
  return { ...definitions, ...definitions.v2 } as Definitions;
};
const methodsOf = (envelope: { oneOf?: unknown[] } | undefined) =>
  new Set(
    (envelope?.oneOf as Array<{ properties?: { method?: { enum?: string[] } } }>).flatMap(
      (v) => v.properties?.method?.enum ?? [],
    ),
  );
const manifest = async () =>
  JSON.parse(await readFile(join(protocol, "MANIFEST.json"), "utf8")) as {
    version: string;
    files: Record<string, string>;
    committed: string[];
    bindings: { files: Record<string, string> };
  };

describe("codex protocol", () => {
  it("the committed snapshot reproduces from the pinned binary", async () => {
    codexBinary();
    const { version, hashes, dir } = generate();
    try {
      const committed = await manifest();
      expect(version).toBe(committed.version);
      expect(hashes).toEqual(committed.files);
      expect(committed.committed).toEqual([SNAPSHOT]);
      expect(sha256(await readFile(join(protocol, SNAPSHOT)))).toBe(hashes[SNAPSHOT]);
    } finally {
      const { rm } = await import("node:fs/promises");
      await rm(join(dir, ".."), { recursive: true, force: true });
    }
  }, 60_000);

  it("the committed bindings are what scripts/codex-protocol.ts generates from the snapshot", async () => {
    const { committed, generated } = await bindingsCheck();
    for (const file of BINDINGS) {
      expect(committed[file], `${file} (regenerate: npm run protocol:codex -- --write)`).toBe(generated[file]);
      expect((await manifest()).bindings.files[file], file).toBe(sha256(generated[file]!));
    }
  }, 60_000);

  it("the notifications the adapter expects are exactly the binary's (others are counted as unknown)", async () => {
    expect(new Set(CODEX_SERVER_NOTIFICATIONS)).toEqual(methodsOf((await snapshot()).ServerNotification));
  });

  it("the experimental fields the adapter sends are in the committed (experimental) protocol", async () => {
    const d = await snapshot();
    expect(d.InitializeCapabilities?.properties).toHaveProperty("experimentalApi");
    expect(d.TurnStartParams?.properties).toHaveProperty("collaborationMode");
    // A runtime mode's approvals are each turn's policy; without the adapter's, Codex's configured one is read.
    expect(d.TurnStartParams?.properties).toHaveProperty("approvalPolicy");
    expect(d.Config?.properties).toHaveProperty("approval_policy");
    expect(d.ModeKind?.enum).toEqual(expect.arrayContaining(["default", "plan"]));
    expect(Object.keys(d.Settings?.properties ?? {}).sort()).toEqual([
      "developer_instructions",
      "model",
      "reasoning_effort",
    ]);
    // The embedder's tools, offered when a thread starts.
    expect(d.ThreadStartParams?.properties).toHaveProperty("dynamicTools");
    for (const params of ["ThreadStartParams", "ThreadResumeParams", "ThreadForkParams"])
      expect(d[params]?.properties, params).toHaveProperty("config");
  });

  it("checks the frames it reads against the schema: a mismatch is a protocol_error, never a guess", () => {
    const at = { threadId: "t1", turnId: "u1" };
    const delta = parseNotification("item/agentMessage/delta", { ...at, itemId: "i1", delta: "hi" });
    expect(delta).toEqual({ method: "item/agentMessage/delta", params: { ...at, itemId: "i1", delta: "hi" } });
    const wrong = parseNotification("item/agentMessage/delta", { ...at, itemId: "i1", delta: 42 });
    expect(wrong).toBeInstanceOf(ProtocolError);
    expect((wrong as ProtocolError).code).toBe("protocol_error");
    expect((wrong as ProtocolError).message).toContain("delta");
    // A known item type whose fields do not match its schema.
    const item = { type: "commandExecution", id: "c1", command: 7 };
    expect(parseNotification("item/started", { ...at, startedAtMs: 1, item })).toBeInstanceOf(ProtocolError);
    // A notification the mapper does not read is not checked.
    expect(parseNotification("thread/tokenUsage/updated", { nonsense: true })).toBeNull();
    // A request the adapter answers is checked; one it does not answer says only where it belongs.
    expect(parseServerRequest("item/tool/call", { ...at, callId: "c", tool: 3 })).toBeInstanceOf(ProtocolError);
    expect(parseServerRequest("item/permissions/requestApproval", { threadId: "t1" })).toEqual({
      method: "item/permissions/requestApproval",
      threadId: "t1",
    });
  });

  it("an item of a type the schema does not name (a newer binary's) is a visibly unknown tool", () => {
    const parsed = parseNotification("item/started", {
      threadId: "t1",
      turnId: "u1",
      startedAtMs: 1,
      item: { type: "hologram", id: "h1", beams: 3 },
    });
    expect(parsed).not.toBeInstanceOf(ProtocolError);
    expect(mapNotification(parsed as Exclude<typeof parsed, ProtocolError | null>)).toEqual([
      {
        type: "item.started",
        threadRef: "t1",
        turnRef: "u1",
        itemRef: "h1",
        kind: "tool_call",
        detail: { toolName: "codex:hologram" },
      },
    ]);
  });

  it("every frame of the recorded transcripts the adapter reads matches the schema", async () => {
    const dir = join(root, "test", "replay", "fixtures", "codex");
    const { readdir } = await import("node:fs/promises");
    let checked = 0;
    for (const file of (await readdir(dir)).filter((f) => f.endsWith(".jsonl")))
      for (const line of (await readFile(join(dir, file), "utf8")).split("\n").filter(Boolean)) {
        const { d, f } = JSON.parse(line) as { d: string; f: { method?: string; id?: number; params?: unknown } };
        if (d !== "in" || !f.method) continue;
        const parsed =
          f.id === undefined ? parseNotification(f.method, f.params) : parseServerRequest(f.method, f.params);
        if (parsed === null) continue;
        expect(parsed, `${file}: ${f.method}`).not.toBeInstanceOf(ProtocolError);
        checked++;
      }
    expect(checked).toBeGreaterThan(50);
  });

  it("every capability the record declares true is exercised by a real-binary test", async () => {
    const tests = (
      await Promise.all(
        ["codex.test.ts", "planning.test.ts", "tools.test.ts"].map((f) =>
          readFile(join(import.meta.dirname, f), "utf8"),
        ),
      )
    ).join("\n");
    // Each true flag, and the test (by title) that exercises it.
    const exercisedBy: Record<string, string> = {
      "sessions.supportsMultipleProviderThreadsPerSession": "forks natively",
      "sessions.supportsModelSwitchInSession": "switches model in the session",
      "sessions.supportsProviderSwitchingViaHandoff": "takes a handoff from another provider",
      "threads.canCreateEmptyThread": "runs a text turn",
      "threads.canReadThreadSnapshot": "rolls back natively",
      "threads.canRollbackThread": "rolls back natively",
      "threads.canForkThread": "forks natively",
      "threads.canForkFromTurn": "forks natively",
      "threads.exposesNativeThreadId": "resumes the thread in a new host process",
      "turns.exposesNativeTurnId": "interrupts mid-stream",
      "turns.emitsTurnStarted": "runs a text turn",
      "turns.emitsTurnCompleted": "runs a text turn",
      "turns.supportsInterrupt": "interrupts mid-stream",
      "turns.supportsActiveSteering": "steers natively",
      "streaming.streamsAssistantText": "interrupts mid-stream",
      "streaming.streamsReasoning": "runs a text turn",
      "streaming.emitsMessageCompleted": "runs a text turn",
      "tools.exposesToolItemIds": "asks before a command",
      "tools.emitsToolStarted": "asks before a command",
      "tools.emitsToolCompleted": "asks before a command",
      "tools.emitsToolOutput": "asks before a command",
      "tools.supportsDynamicToolCallbacks": "calls an embedder tool back",
      "approvals.supportsCommandApproval": "asks before a command",
      "approvals.supportsFileChangeApproval": "asks before a file change",
      "approvals.approvalsHaveNativeRequestIds": "asks before a command",
      "approvals.approvalCallbacksAreLiveOnly": "SIGKILL of the Codex host",
      "context.acceptsSyntheticUserContext": "takes a handoff from another provider",
      "context.canConsumeHandoffSummaries": "takes a handoff from another provider",
      "context.supportsDeltaHandoff": "then a delta when it comes back",
      "context.supportsFullThreadHandoff": "takes a handoff from another provider",
      "checkpointing.appCanCheckpointFilesystem": "files return to the checkpoint",
      "checkpointing.providerCanRollbackConversation": "rolls back natively",
      "checkpointing.providerCanReadConversationSnapshot": "rolls back natively",
      "planning.emitsPlanUpdated": "shows update_plan as the run's live plan",
      "planning.emitsProposedPlan": "shows <proposed_plan> as a proposed plan",
      "planning.supportsStructuredQuestions": "asks request_user_input as a structured question",
      "planning.planDeltasHaveItemIds": "whose node is Codex's plan item",
    };
    // The record of either collaboration mode a session can run its turns in.
    const declared = new Set(
      (["default", "plan"] as const).flatMap((mode) =>
        Object.entries(
          codexCapabilities("0.171.0", mode) as unknown as Record<string, Record<string, unknown>>,
        ).flatMap(([group, fields]) =>
          typeof fields === "object"
            ? Object.entries(fields)
                .filter(([, v]) => v === true)
                .map(([f]) => `${group}.${f}`)
            : [],
        ),
      ),
    );
    expect([...declared].filter((flag) => !exercisedBy[flag])).toEqual([]);
    for (const [flag, title] of Object.entries(exercisedBy)) expect(tests, `${flag} -> "${title}"`).toContain(title);
  });

  it("a missing binary fails loudly with host_unavailable", async () => {
    const { rt, cleanup } = await openFaultRuntime({ codex: createCodexAdapter({ binary: "/nonexistent/codex" }) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "codex" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "hi" })).runId);
      expect(run.status).toBe("failed");
      expect(run.failure?.failureClass).toBe("host_unavailable");
    } finally {
      await cleanup();
    }
  });
});
