import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { codexCapabilities } from "../../src/adapters/codex/capabilities.js";
import { CODEX_SERVER_NOTIFICATIONS } from "../../src/adapters/codex/protocol/notifications.js";
import { createCodexAdapter } from "../../src/adapters/codex/adapter.js";
import { generate } from "../../scripts/codex-protocol.js";
import { openFaultRuntime } from "../faults/helpers.js";
import { codexBinary } from "./harness.js";

/**
 * The adapter against the pinned binary's own protocol description: the committed snapshots
 * reproduce, every method and notification the adapter uses exists there, every capability
 * the record declares is exercised by a test, and a missing binary fails loudly.
 */

const root = join(import.meta.dirname, "..", "..");
const protocol = join(root, "src", "adapters", "codex", "protocol");
const methodsOf = async (file: string): Promise<Set<string>> => {
  const schema = JSON.parse(await readFile(join(protocol, file), "utf8")) as {
    oneOf: Array<{ properties?: { method?: { enum?: string[] } } }>;
  };
  return new Set(schema.oneOf.flatMap((v) => v.properties?.method?.enum ?? []));
};
const source = (file: string) => readFile(join(root, "src", "adapters", "codex", file), "utf8");

describe("codex protocol", () => {
  it("the committed snapshots reproduce from the pinned binary", async () => {
    codexBinary();
    const { version, hashes } = generate();
    const manifest = JSON.parse(await readFile(join(protocol, "MANIFEST.json"), "utf8")) as {
      version: string;
      files: Record<string, string>;
      committed: string[];
    };
    expect(version).toBe(manifest.version);
    expect(hashes).toEqual(manifest.files);
    const { createHash } = await import("node:crypto");
    for (const file of manifest.committed)
      expect(
        createHash("sha256")
          .update(await readFile(join(protocol, file)))
          .digest("hex"),
      ).toBe(hashes[file]);
  }, 60_000);

  it("the notifications the adapter expects are exactly the binary's (others are counted as unknown)", async () => {
    expect(new Set(CODEX_SERVER_NOTIFICATIONS)).toEqual(await methodsOf("ServerNotification.json"));
  });

  it("every method, notification and server request the adapter uses is in the binary's protocol", async () => {
    const [client, notifications, requests] = await Promise.all([
      methodsOf("ClientRequest.json"),
      methodsOf("ServerNotification.json"),
      methodsOf("ServerRequest.json"),
    ]);
    const adapter = await source("adapter.ts");
    const called = [...adapter.matchAll(/call(?:<[^>]*>)?\((?:sessionId, )?"([a-z/]+)"/g)].map((m) => m[1]!);
    expect(called.length).toBeGreaterThanOrEqual(9);
    for (const method of called) expect(client, method).toContain(method);
    const mapper = await source("mapper.ts");
    const [notes, serverPart] = mapper.split("export function mapServerRequest");
    const handled = [...notes!.matchAll(/case "([a-zA-Z/]+)":/g)]
      .map((m) => m[1]!)
      .filter((m) => m.includes("/") || m === "error" || m === "warning");
    for (const method of handled) expect(notifications, method).toContain(method);
    for (const method of [...serverPart!.matchAll(/case "([a-zA-Z/]+)":/g)].map((m) => m[1]!))
      expect(requests, method).toContain(method);
  });

  it("the experimental fields the adapter sends are in the binary's experimental protocol", async () => {
    const scratch = await mkdtemp(join(tmpdir(), "codex-experimental-"));
    try {
      // A temporary HOME and CODEX_HOME: generating never touches the user's Codex state.
      const env = {
        PATH: process.env.PATH ?? "",
        HOME: join(scratch, "home"),
        CODEX_HOME: join(scratch, "codex-home"),
      };
      const out = join(scratch, "out");
      execFileSync(codexBinary(), ["app-server", "generate-json-schema", "--experimental", "--out", out], {
        env,
        stdio: "ignore",
      });
      const { definitions: d } = JSON.parse(
        await readFile(join(out, "codex_app_server_protocol.v2.schemas.json"), "utf8"),
      ) as { definitions: Record<string, { properties?: Record<string, unknown>; enum?: string[] }> };
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
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  }, 60_000);

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
