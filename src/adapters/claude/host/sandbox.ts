import type { Options } from "../protocol/sdk.js";
import type { SandboxPolicy } from "../../contract.js";

/**
 * The runtime's sandbox policy (what the provider may do without asking) as Claude's permission
 * mode, the one lever the SDK has for it without an OS sandbox (Claude's own needs bubblewrap):
 * - read-only: `default`. Claude reads inside the working directory and runs commands it classes
 *   as read-only on its own, and asks before every edit, write, read outside it and other command;
 * - workspace-write: `acceptEdits`. Edits and writes inside the working directory, and the
 *   file-system commands Claude knows there (mkdir, rm, a redirect into a file...), go ahead;
 *   a write or read outside it and any other command asks;
 * - full-access: `bypassPermissions`. Nothing asks.
 * Where this falls short of a sandbox (commands under workspace-write, root) is in GAP.md.
 */
export function sandboxOptions(
  policy: SandboxPolicy,
): Pick<Options, "permissionMode" | "allowDangerouslySkipPermissions"> {
  switch (policy) {
    case "read-only":
      return { permissionMode: "default" };
    case "workspace-write":
      return { permissionMode: "acceptEdits" };
    case "full-access":
      // The SDK's own guard against bypassing by accident: the runtime's option is the intent.
      return { permissionMode: "bypassPermissions", allowDangerouslySkipPermissions: true };
  }
}
