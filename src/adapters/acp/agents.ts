import { readdir, rename } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { HostUnavailableError } from "../../domain/errors.js";
import type { AcpAdapterOptions } from "./adapter.js";

/**
 * Known agents as target options: the ACP adapter is generic, and everything one agent needs that another does not
 * (its command line, its environment, its authentication method, what it does that its handshake does not say, its
 * quirks) is here, as data and documented hooks, never as a condition on an agent's name in the adapter.
 */

/** A model endpoint on loopback or elsewhere, and the key the agent sends it (never logged, in no file). */
export interface AgentEndpoint {
  /** The endpoint's base URL as the agent takes it. */
  baseUrl: string;
  apiKey: string;
}

/** Where an agent keeps its state: its HOME (tests give temporary ones; omitted: the user's own). */
export interface AgentHome {
  home?: string;
}

function installed(pkg: string, file: string): string {
  try {
    return join(dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`)), file);
  } catch {
    throw new HostUnavailableError(`${pkg} is not installed: install it beside tiller-runtime`);
  }
}

/**
 * Gemini CLI (`gemini --acp`, @google/gemini-cli 0.61.0) with a Gemini API key; `baseUrl` goes to
 * `GOOGLE_GEMINI_BASE_URL` (http is allowed for loopback only). Its home needs `.gemini/settings.json` selecting the
 * API key (`security.auth.selectedType: "gemini-api-key"`).
 *
 * Quirk: its `session/load` first re-creates the session's chat file, named by the current minute, then reads it;
 * within the minute the file was written, that clobbers the history and the load fails. `beforeLoad` renames the
 * session's chat files a minute back first. And it replays the history after its reply to the load (ACP has it
 * before), then says its commands (`available_commands_update`): the load completes there.
 */
export function geminiAgent(options: AgentHome & { endpoint?: AgentEndpoint; executable?: string } = {}) {
  const script = options.executable ?? installed("@google/gemini-cli", "bundle/gemini.js");
  const home = options.home;
  return {
    agent: {
      command: process.execPath,
      args: [script, "--acp", "--skip-trust"],
      env: {
        GEMINI_CLI_NO_RELAUNCH: "true",
        ...(home ? { HOME: home } : {}),
        ...(options.endpoint ? { GOOGLE_GEMINI_BASE_URL: options.endpoint.baseUrl } : {}),
      },
      secretEnv: (options.endpoint ? { GEMINI_API_KEY: options.endpoint.apiKey } : {}) as Record<string, string>,
    },
    authMethod: "gemini-api-key",
    // Gemini shares no plan over ACP (its todo tool is off for the preview models it runs), reads unasked, sends no
    // tool output in its tool call updates, and gives its messages no ids.
    behaviour: { plans: false, asksBeforeReads: false, toolOutput: false, messageIds: false },
    replayEndsWith: "available_commands_update",
    beforeLoad: async ({ threadRef }) => {
      if (home) await backdateChats(join(home, ".gemini", "tmp"), threadRef);
    },
  } satisfies AcpAdapterOptions;
}

/** Gemini's chat file of a session: `session-<YYYY-MM-DDTHH-MM>-<first 8 of its id>.jsonl`. */
const CHAT_FILE = /^session-(\d{4})-(\d{2})-(\d{2})T(\d{2})-(\d{2})-([^.]+)\.jsonl$/;

/** Renames each chat file of the session under `tmp/<project>/chats/` to the minute before its own. */
async function backdateChats(tmp: string, sessionId: string): Promise<void> {
  const short = sessionId.slice(0, 8);
  const projects = await readdir(tmp).catch(() => [] as string[]);
  for (const project of projects) {
    const chats = join(tmp, project, "chats");
    for (const file of await readdir(chats).catch(() => [] as string[])) {
      const match = CHAT_FILE.exec(file);
      if (!match || match[6] !== short) continue;
      const [, y, mo, d, h, mi] = match.map(Number) as number[];
      const earlier = new Date(Date.UTC(y!, mo! - 1, d!, h!, mi! - 1));
      const stamp = earlier.toISOString().slice(0, 16).replace(":", "-");
      await rename(join(chats, file), join(chats, `session-${stamp}-${short}.jsonl`));
    }
  }
}
