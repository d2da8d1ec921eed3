/** The checkpoint store's inputs and results (gitStore.ts). */

export interface ChangedFile {
  path: string;
  change: "added" | "modified" | "deleted";
}

export interface CheckpointCapture {
  /** Commit id in the runtime-owned repository. */
  commit: string;
  /** Files that differ from the parent checkpoint (content or mode; without a parent, every file), sorted by path. */
  files: ChangedFile[];
  insertions: number;
  deletions: number;
}

export interface CaptureInput {
  cwd: string;
  /** Pinned as `refs/tiller/<ref>`: letters, digits, `_`, `-`, and `/` between non-empty parts. */
  ref: string;
  parent: string | null;
  message: string;
  /** Paths relative to cwd (e.g. ".tiller") kept out of the snapshot. */
  exclude?: string[];
}

export interface RestoreInput {
  cwd: string;
  commit: string;
  /** Paths relative to cwd that restore must leave alone (should match the capture's). */
  exclude?: string[];
  /**
   * Told every file about to change (content or mode) before the first one does; not called
   * when nothing changes. A rejection cancels the restore with nothing changed.
   */
  beforeChange?: (files: ChangedFile[]) => Promise<void>;
}

export interface RevertInput {
  cwd: string;
  /** The scope's start: what its files go back to. */
  from: string;
  /** The scope's end: its files are reverted only while they are still as it left them. */
  to: string;
  /** Paths relative to cwd that revert must leave alone (should match the capture's). */
  exclude?: string[];
  /** As for restore: told every file about to change before the first one does. */
  beforeChange?: (files: ChangedFile[]) => Promise<void>;
}

export interface StoreOptions {
  /**
   * The environment git runs with; its HOME, XDG_CONFIG_HOME and GIT_CONFIG_GLOBAL/SYSTEM/NOSYSTEM
   * locate the user's git config, read (never written) for core.excludesFile. Default: process.env.
   */
  env?: NodeJS.ProcessEnv;
}
