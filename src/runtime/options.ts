import type { InspectionEvent } from "xstate";
import type { ProviderAdapter, SandboxPolicy } from "../adapters/contract.js";
import type { IdSource } from "../domain/ids.js";

export interface RuntimeOptions {
  /** Where the runtime keeps its log and state. Default: `.tiller` in the working directory. */
  dataDir?: string;
  /** Provider targets by id. */
  providers: Record<string, ProviderAdapter>;
  /** Id source (a boundary: inject a deterministic one in tests). */
  ids?: IdSource;
  /** Clock (a boundary). */
  now?: () => Date;
  /** Allow an interrupt to stop a provider session when the provider cannot interrupt (destructive). */
  allowSessionStopInterrupt?: boolean;
  /** Group-commit window of the event log, in ms. */
  groupCommitMs?: number;
  /**
   * The live inspector. `true`, a port, or `{ port, showText, token, onListening }` starts its
   * server on 127.0.0.1 (a free port by default) with a random token in its URL, which goes to
   * `onListening` (default: printed on stderr) and `runtime.inspectorUrl`. A function receives
   * the XState inspection events of every actor instead.
   */
  inspect?: ((event: InspectionEvent) => void) | boolean | number | InspectOptions;
  /**
   * Capture git checkpoints of each thread's working directory (a baseline before each run,
   * a checkpoint after it) in a private repository under the data directory; needed for
   * `rollback` to restore files. Default false.
   */
  checkpoints?: boolean;
  /**
   * The sandbox policy sessions start under. Providers without structured approvals run
   * under it without asking (recorded as the `approvals_by_sandbox` policy). Default
   * `workspace-write`.
   */
  sandbox?: SandboxPolicy;
  /** Stop a provider session after this long without a turn, giving back its host lease (default 10 min; null: never). */
  sessionIdleMs?: number | null;
}

export interface InspectOptions {
  /** 0 or absent: a free port. */
  port?: number;
  /** Let the page see prompts, message text and command output (credentials stay masked). Default false. */
  showText?: boolean;
  /** A fixed token (default: random), so a page or feed can reconnect to a restarted inspector: at least 16 of A-Z a-z 0-9 . _ ~ - (it is a path segment of the URL). */
  token?: string;
  /** Receives the page's URL, token included (default: printed on stderr). */
  onListening?: (url: string) => void;
}
