import { cp, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { check, type Manifest } from "../../scripts/claude-protocol.js";
import { claudeCapabilities } from "../../src/adapters/claude/capabilities.js";
import { permissionPayload } from "../../src/adapters/claude/tools.js";
import { supportsApprovalFor } from "../../src/capabilities/predicates.js";
import type { ApprovalKind, RequestKind } from "../../src/domain/items.js";

/**
 * The adapter against what the pinned Claude Code and Agent SDK say of themselves: its bindings (`protocol/`)
 * reproduce from the installed SDK's declarations and are where its SDK types come from, every tool it names is one
 * they know, every message type it reads is in the SDK's types, and every capability the record declares is exercised
 * by a real-binary test.
 */

const root = join(import.meta.dirname, "..", "..");
const sdk = join(root, "node_modules", "@anthropic-ai", "claude-agent-sdk");
const folder = join(root, "src", "adapters", "claude");
const source = (file: string) => readFile(join(folder, file), "utf8");
const mapperSource = () => source("mapper.ts");

/** The adapter's TypeScript sources but its generated bindings, by path in the folder. */
async function adapterSources(): Promise<Map<string, string>> {
  const files = (await readdir(folder, { recursive: true }))
    .filter((f) => f.endsWith(".ts") && !f.startsWith("protocol"))
    .sort();
  return new Map(await Promise.all(files.map(async (f) => [f, await source(f)] as const)));
}

describe("claude protocol bindings", () => {
  it("reproduce from the installed SDK's declarations (npm run protocol:claude)", async () => {
    expect(await check()).toEqual([]);
  });

  it("fail the check once the SDK's declarations are not those MANIFEST.json records", async () => {
    const copy = await mkdtemp(join(tmpdir(), "claude-protocol-"));
    try {
      await cp(join(folder, "protocol"), copy, { recursive: true });
      const manifest = JSON.parse(await readFile(join(copy, "MANIFEST.json"), "utf8")) as Manifest;
      const declaration = "@anthropic-ai/claude-agent-sdk/sdk.d.ts";
      expect(manifest.declarations[declaration]).toMatch(/^[0-9a-f]{64}$/);
      // As a manifest written from another SDK release reads against this one.
      manifest.declarations[declaration] = "0".repeat(64);
      manifest.version = "0.0.1";
      await writeFile(join(copy, "MANIFEST.json"), JSON.stringify(manifest, null, 2));
      expect(await check(copy)).toEqual([
        "MANIFEST.json says @anthropic-ai/claude-agent-sdk 0.0.1, the installed SDK is 0.3.332",
        `${declaration} differs from the one MANIFEST.json records`,
      ]);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });

  it("are where the adapter's SDK types come from, and each is used", async () => {
    const sources = await adapterSources();
    const fromSdk = [...sources].flatMap(([file, text]) =>
      [...text.matchAll(/import (type )?\{([^}]*)\} from "@anthropic-ai\/claude-agent-sdk[^"]*"/g)].map(
        (m) => `${file}: ${m[1] ?? ""}{${m[2]!.replace(/\s+/g, " ").trim()}}`,
      ),
    );
    // The host calls the SDK's functions; every type it and the rest use is a binding.
    expect(fromSdk).toEqual([
      `${join("host", "threads.ts")}: {forkSession, getSessionInfo, getSessionMessages, query}`,
    ]);
    const bindings = await source(join("protocol", "sdk.ts"));
    const exported = [...bindings.matchAll(/export type \{([^}]*)\}/g)].flatMap((m) =>
      m[1]!
        .split(",")
        .map((n) => n.trim())
        .filter(Boolean),
    );
    const imported = new Set(
      [...sources.values()].flatMap((text) =>
        [...text.matchAll(/import type \{([^}]*)\} from "(?:\.\.\/|\.\/)+protocol\/sdk\.js"/g)].flatMap((m) =>
          m[1]!
            .split(",")
            .map((n) => n.trim())
            .filter(Boolean),
        ),
      ),
    );
    expect(new Set(exported)).toEqual(imported);
  });
});

describe("claude protocol", () => {
  it("every tool the adapter names is a tool of the pinned Claude Code", async () => {
    // The SDK's own list of tool names, and the tools the binary announced in a recorded session.
    const bundle = await readFile(join(sdk, "sdk.mjs"), "utf8");
    const sdkTools = JSON.parse(/\["Agent","Artifact","AskUserQuestion"[^\]]*\]/.exec(bundle)?.[0] ?? "[]") as string[];
    const recorded = await readFile(join(root, "test", "replay", "fixtures", "claude", "text-turn.jsonl"), "utf8");
    const announced = JSON.parse(/"tools":(\[[^\]]*\])/.exec(recorded)?.[1] ?? "[]") as string[];
    expect(sdkTools).toContain("Bash");
    expect(announced).toContain("Bash");
    const known = new Set([...sdkTools, ...announced]);
    const tools = await source("tools.ts");
    const kinds = /const TOOL_KIND[^{]*\{([^}]*)\}/.exec(tools)![1]!;
    const subagents = /const SUBAGENT_TOOLS = new Set\(\[([^\]]*)\]\)/.exec(tools)![1]!;
    const named = [
      ...[...kinds.matchAll(/(\w+):/g)].map((m) => m[1]!),
      ...[...subagents.matchAll(/"(\w+)"/g)].map((m) => m[1]!),
      ...[...tools.matchAll(/(?:tool|name) === "(\w+)"/g)].map((m) => m[1]!),
    ];
    expect(new Set(named)).toEqual(
      new Set([
        "Bash",
        "Edit",
        "Write",
        "NotebookEdit",
        "Agent",
        "Task",
        "Read",
        "AskUserQuestion",
        "ExitPlanMode",
        "TodoWrite",
      ]),
    );
    for (const tool of named) expect(known, tool).toContain(tool);
  });

  it("every SDK message type the mapper reads is in the SDK's message types", async () => {
    const types = await readFile(join(sdk, "sdk.d.ts"), "utf8");
    const mapper = await mapperSource();
    const map = mapper.slice(mapper.indexOf("  map(message: SDKMessage)"), mapper.indexOf("  async subagentRef("));
    const read = [...map.matchAll(/case "(\w+)":/g)].map((m) => m[1]!);
    expect(read).toEqual(["stream_event", "assistant", "user", "system", "result"]);
    for (const type of read) expect(types, type).toContain(`type: '${type}';`);
    expect(types).toContain("subtype: 'task_notification';");
    expect(types).toContain("subtype: 'task_started';");
  });

  it("every approval kind the mapper makes of a permission prompt is one the record declares", () => {
    // Every tool Claude may ask about that the mapper names; the rest are dynamic-tool requests, no approval kind.
    const tools = [
      "Bash",
      "Edit",
      "Write",
      "NotebookEdit",
      "Read",
      "AskUserQuestion",
      "ExitPlanMode",
      "Agent",
      "Other",
    ];
    const approvals: Record<ApprovalKind, true> = {
      command: true,
      file_read: true,
      file_change: true,
      apply_patch: true,
    };
    const isApproval = (kind: RequestKind): kind is ApprovalKind => kind in approvals;
    const made = tools.map((tool) => permissionPayload(tool, { questions: [{ question: "q" }] }).kind);
    expect(new Set(made.filter(isApproval))).toEqual(new Set(["command", "file_change", "file_read"]));
    const caps = claudeCapabilities();
    expect(made.filter(isApproval).filter((kind) => !supportsApprovalFor(caps, kind))).toEqual([]);
  });

  it("every capability the record declares true is exercised by a real-binary test", async () => {
    const files = ["claude.test.ts", "sandbox.test.ts", "runtimeMode.test.ts", "approvals.test.ts"];
    const tests = (await Promise.all(files.map((f) => readFile(join(import.meta.dirname, f), "utf8")))).join("\n");
    const exercisedBy: Record<string, string> = {
      "sessions.supportsModelSwitchInSession": "switches the model inside the session",
      "sessions.supportsProviderSwitchingViaHandoff": "takes a handoff from another provider",
      "sessions.supportsRuntimeModeSwitchInSession": "a thread switched to plan mode writes nothing",
      "threads.canCreateEmptyThread": "runs a text turn",
      "threads.canRollbackThread": "rolls back by resuming at an earlier message",
      "threads.canForkThread": "forks by forking the session",
      "threads.exposesNativeThreadId": "resumes the session in a new host process",
      "turns.emitsTurnCompleted": "runs a text turn",
      "turns.supportsInterrupt": "interrupts mid-stream",
      "turns.supportsSteeringByInterruptRestart": "steers by interrupt-restart",
      "streaming.streamsAssistantText": "interrupts mid-stream",
      "streaming.streamsReasoning": "streams thinking as a reasoning item",
      "streaming.emitsMessageCompleted": "runs a text turn",
      "tools.exposesToolItemIds": "asks before Bash",
      "tools.emitsToolStarted": "asks before Bash",
      "tools.emitsToolCompleted": "asks before Bash",
      "tools.emitsToolOutput": "asks before Bash",
      "approvals.supportsCommandApproval": "asks before Bash",
      "approvals.supportsFileReadApproval": "asks before a Read outside the cwd",
      "approvals.supportsFileChangeApproval": "edits a file after reading it",
      "approvals.approvalsHaveNativeRequestIds": "asks before Bash",
      "approvals.approvalCallbacksAreLiveOnly": "SIGKILL of the host mid-turn",
      "approvals.approvalsCanOriginateFromSubagents": "a subagent's own permission prompts hang under the subagent",
      "planning.emitsTodoList": "shows TodoWrite as a todo list",
      "planning.emitsProposedPlan": "as a proposed plan",
      "planning.supportsStructuredQuestions": "as a structured question",
      "subagents.supportsSubagents": "shows a subagent as a nested node",
      "subagents.emitsSubagentLifecycle": "shows a subagent as a nested node",
      "context.acceptsSyntheticUserContext": "takes a handoff from another provider",
      "context.canConsumeHandoffSummaries": "takes a handoff from another provider",
      "context.supportsDeltaHandoff": "takes a handoff from another provider",
      "context.supportsFullThreadHandoff": "takes a handoff from another provider",
      "checkpointing.appCanCheckpointFilesystem": "rolls back by resuming at an earlier message",
      "checkpointing.providerCanRollbackConversation": "rolls back by resuming at an earlier message",
    };
    const record = claudeCapabilities() as unknown as Record<string, Record<string, unknown>>;
    const declared = Object.entries(record).flatMap(([group, fields]) =>
      typeof fields === "object"
        ? Object.entries(fields)
            .filter(([, v]) => v === true)
            .map(([f]) => `${group}.${f}`)
        : [],
    );
    expect(declared.filter((flag) => !exercisedBy[flag])).toEqual([]);
    for (const [flag, title] of Object.entries(exercisedBy)) expect(tests, `${flag} -> "${title}"`).toContain(title);
  });
});
