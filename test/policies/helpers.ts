import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect } from "vitest";
import { createScriptedAdapter, TillerError, type CapabilityOverrides, type ScriptSource, type ScriptStep, type TillerErrorCode, type TillerRuntime } from "../../src/index.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import type { ScriptedBackend } from "../../src/adapters/scripted/backend.js";
import type { DomainEvent, DomainEventOf } from "../../src/domain/events.js";
import type { LogRecord } from "../../src/runtime/store/eventLog.js";
import { nextEvent, ofType, rejection } from "../helpers/runtime.js";

/** Shared by the degradation-policy tests (fallbacks.test.ts, rollback.test.ts). */

export const hang: ScriptStep[] = [{ type: "text", text: "working" }, { type: "hang" }];

/** A provider without any structured approval. */
export const noApprovals: CapabilityOverrides = {
  approvals: { supportsCommandApproval: false, supportsFileReadApproval: false, supportsFileChangeApproval: false, supportsApplyPatchApproval: false },
};

/** A scripted adapter with capability overrides, a script (default: echo) and optionally a shared backend. */
export function scripted(capabilities: CapabilityOverrides = {}, script?: ScriptSource, backend?: ScriptedBackend): ProviderAdapter {
  return createScriptedAdapter({ capabilities, ...(script ? { script } : {}), ...(backend ? { backend } : {}) });
}

/** Resolves once the run's turn streams (it is active, not starting). */
export const streaming = (rt: TillerRuntime, runId: string) => nextEvent(rt, "node.delta", (e) => e.runId === runId);

/** The fields of a policy record the tests compare. */
export const row = (p: { threadId: string | null; runId: string | null; capability: string; outcome: string }) => [p.threadId, p.runId, p.capability, p.outcome];

/** The `policy.applied` records of one named policy, in log order. */
export function policies(records: LogRecord<DomainEvent>[], policy: string): DomainEventOf<"policy.applied">[] {
  return ofType(records, "policy.applied").filter((e) => e.policy === policy);
}

/** Awaits a rejection and checks it is a TillerError with this code. */
export async function rejectsWith(promise: Promise<unknown>, code: TillerErrorCode): Promise<TillerError> {
  const error = await rejection(promise);
  expect(error).toBeInstanceOf(TillerError);
  expect((error as TillerError).code).toBe(code);
  return error as TillerError;
}

/** A fresh temporary directory and its removal. */
export async function tempDir(prefix: string): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

const exec = promisify(execFile);

/** The user's git in `dir`, isolated from this machine's global config and from any GIT_* in the env. */
export async function git(dir: string, ...args: string[]): Promise<string> {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("GIT_")) env[key] = value;
  }
  env.GIT_CONFIG_NOSYSTEM = "1";
  env.GIT_CONFIG_GLOBAL = "/dev/null";
  const { stdout } = await exec("git", args, { cwd: dir, env });
  return stdout;
}

/** Every file under `dir` (path -> content), skipping the top-level names in `skip`. */
export async function snapshotFiles(dir: string, skip: string[] = []): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (at: string, prefix: string): Promise<void> => {
    for (const entry of await readdir(at, { withFileTypes: true })) {
      const path = prefix + entry.name;
      if (skip.includes(path)) continue;
      if (entry.isDirectory()) await walk(join(at, entry.name), `${path}/`);
      else out[path] = await readFile(join(at, entry.name), "utf8");
    }
  };
  await walk(dir, "");
  return out;
}

