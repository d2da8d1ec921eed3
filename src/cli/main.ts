#!/usr/bin/env node
import { createInterface } from "node:readline/promises";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { InvalidInputError, isTillerError } from "../domain/errors.js";
import { runDemo } from "./demo.js";
import { DEMO_PROVIDERS, type DemoProviderName } from "./demoProviders.js";
import { runInspect } from "./inspect.js";
import { portOf } from "../runtime/inspector.js";

const HELP = `tiller: an embeddable runtime for coding-agent providers

Usage:
  tiller demo [--provider scripted|codex|claude|gemini|claude-acp|codex-acp] [--yes]
              [--data-dir DIR] [--no-color]
      Drive a provider through streamed text, an approval, an interrupt and a queued
      follow-up (the scripted provider also shows a todo plan). --provider codex or
      claude runs the real Codex or Claude Code binary, gemini, claude-acp or
      codex-acp the Gemini CLI, claude-agent-acp or codex-acp over ACP (those two
      show their plans too), against the built-in model simulator (offline, no
      account).
      Asks before approving when interactive; --yes approves without asking; a
      non-interactive run never blocks.
  tiller inspect [--port N] [--data-dir DIR] [--show-text] [--yes]
  tiller inspect --replay DIR [--port N] [--show-text]
      The live inspector (a local page on 127.0.0.1; open the printed URL, token
      included): actor tree, statecharts, capabilities and degradations, event log,
      approvals. Without --replay it drives a scripted session that waits for you to
      approve from the page (--yes approves by itself) and then steers a provider that
      cannot steer natively. --replay opens a recorded data directory read-only and
      steps through its history. Prompts and message text are hidden unless
      --show-text. Stop with Ctrl-C.
  tiller help
  tiller version
`;

export async function main(argv: string[]): Promise<number> {
  const [command = "help", ...rest] = argv;
  switch (command) {
    case "demo": {
      const { values } = parseArgs({
        args: rest,
        options: {
          yes: { type: "boolean", short: "y", default: false },
          "data-dir": { type: "string" },
          "no-color": { type: "boolean", default: false },
          provider: { type: "string", default: "scripted" },
        },
      });
      const provider = values.provider as "scripted" | DemoProviderName;
      if (provider !== "scripted" && !DEMO_PROVIDERS.includes(provider)) {
        const names = ["scripted", ...DEMO_PROVIDERS];
        throw new InvalidInputError(
          "provider",
          `must be ${names.slice(0, -1).join(", ")} or ${names.at(-1)}, not "${values.provider}"`,
        );
      }
      const interactive = Boolean(process.stdin.isTTY && process.stdout.isTTY);
      const rl = interactive && !values.yes ? createInterface({ input: process.stdin, output: process.stdout }) : null;
      try {
        const result = await runDemo({
          dataDir: resolve(values["data-dir"] ?? ".tiller/demo"),
          yes: values.yes,
          ask: rl ? async (q) => !/^n/i.test((await rl.question(q)).trim()) : null,
          write: (text) => void process.stdout.write(text),
          color: !values["no-color"] && Boolean(process.stdout.isTTY),
          provider,
        });
        process.stdout.write(`Event log: ${result.eventLog} (${result.events} events this session)\n`);
        return 0;
      } finally {
        rl?.close();
      }
    }
    case "inspect": {
      const { values } = parseArgs({
        args: rest,
        options: {
          port: { type: "string", default: "0" },
          "data-dir": { type: "string" },
          replay: { type: "string" },
          "show-text": { type: "boolean", default: false },
          yes: { type: "boolean", short: "y", default: false },
        },
      });
      await runInspect({
        port: portOf(values.port, "port"),
        dataDir: resolve(values["data-dir"] ?? ".tiller/inspect"),
        replay: values.replay ? resolve(values.replay) : null,
        showText: values["show-text"],
        yes: values.yes,
        write: (text) => void process.stdout.write(text),
      });
      return 0;
    }
    case "version":
    case "--version":
      process.stdout.write("tiller 0.1.0\n");
      return 0;
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(HELP);
      return 0;
    default:
      process.stderr.write(`unknown command "${command}"\n\n${HELP}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (error: unknown) => {
    process.stderr.write(
      isTillerError(error) ? `tiller: ${error.code}: ${error.message}\n` : `tiller: ${String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
