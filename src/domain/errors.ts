/**
 * Typed errors with stable codes. Every failure that crosses the public API is one of
 * these; callers branch on `code`, never on message text.
 */
export type TillerErrorCode =
  | "invalid_input"
  | "not_found"
  | "conflict"
  | "capability_unsupported"
  | "resume_failed"
  | "not_resumable"
  | "protocol_error"
  | "host_unavailable"
  | "provider_error"
  | "data_dir_locked"
  | "store_corrupt"
  | "store_failed"
  | "checkpoint_failed"
  | "inspector_unavailable"
  | "timeout"
  | "closed";

export class TillerError extends Error {
  readonly code: TillerErrorCode;
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: TillerErrorCode, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }

  toJSON(): { code: TillerErrorCode; message: string; details: Record<string, unknown> } {
    return { code: this.code, message: this.message, details: { ...this.details } };
  }
}

/** Input failed validation; `field` is the dotted path of the first offending field. */
export class InvalidInputError extends TillerError {
  readonly field: string;
  constructor(field: string, message: string, details: Record<string, unknown> = {}) {
    super("invalid_input", field ? `${field}: ${message}` : message, { field, ...details });
    this.field = field;
  }
}

export class NotFoundError extends TillerError {
  constructor(entity: string, id: string) {
    super("not_found", `${entity} ${id} does not exist`, { entity, id });
  }
}

/** The request is valid but the entity's current state does not allow it. */
export class ConflictError extends TillerError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("conflict", message, details);
  }
}

/**
 * A capability the operation needs is missing. `fallback` names the policy that was
 * considered; `refused` says the runtime declined to take it.
 */
export class CapabilityUnsupportedError extends TillerError {
  readonly capability: string;
  constructor(capability: string, message: string, details: Record<string, unknown> = {}) {
    super("capability_unsupported", message, { capability, ...details });
    this.capability = capability;
  }
}

/** A provider could not resume from a stored cursor. */
export class ResumeFailedError extends TillerError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("resume_failed", message, details);
  }
}

/** The thing being answered belongs to a host generation or session that is gone. */
export class NotResumableError extends TillerError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("not_resumable", message, details);
  }
}

export class ProtocolError extends TillerError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("protocol_error", message, details);
  }
}

export class HostUnavailableError extends TillerError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("host_unavailable", message, details);
  }
}

/** A provider call failed for a reason the provider reported. */
export class ProviderError extends TillerError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("provider_error", message, details);
  }
}

/**
 * Another runtime holds the data directory's lock. `holderPid` is the pid its `LOCK` names, as seen in the holder's own
 * pid namespace (0 when the `LOCK` names nobody: its holder is still writing it, or it was overwritten); `holder`
 * says where it runs.
 */
export class DataDirLockedError extends TillerError {
  constructor(dataDir: string, holderPid: number, holder?: string) {
    const who = holder ?? (holderPid > 0 ? `pid ${holderPid}` : "its LOCK does not name it (yet)");
    super("data_dir_locked", `data directory ${dataDir} is in use by another runtime (${who})`, {
      dataDir,
      holderPid,
      ...(holder === undefined ? {} : { holder }),
    });
  }
}

export class StoreCorruptError extends TillerError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("store_corrupt", message, details);
  }
}

/**
 * The data directory cannot be written (a full disk, a read-only or failing device): nothing
 * more can be recorded, so nothing more is accepted. What was acknowledged before stays in
 * the log; reopen once the cause is fixed.
 */
export class StoreFailedError extends TillerError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("store_failed", message, details);
  }

  /** The typed form of a filesystem error met while writing or opening the store. */
  static from(error: unknown, doing: string): TillerError {
    if (error instanceof TillerError) return error;
    if (!isFileSystemError(error)) return new StoreFailedError(`${doing} failed: ${String(error)}`);
    const code = (error as NodeJS.ErrnoException | null)?.code;
    return Object.assign(
      new StoreFailedError(
        `${doing} failed: ${code ?? String(error)}${code ? ` (${(error as Error).message})` : ""}`,
        code ? { errno: code } : {},
      ),
      { cause: error },
    );
  }
}

/** A filesystem checkpoint could not be captured or restored (git failed, or the commit is gone). */
export class CheckpointError extends TillerError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("checkpoint_failed", message, details);
  }
}

/**
 * The live inspector asked for (`inspect`) could not start: its port is taken or not ours to listen on. The runtime
 * does not open (nothing was written); open again without it, or on another port.
 */
export class InspectorUnavailableError extends TillerError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("inspector_unavailable", message, details);
  }
}

export class ClosedError extends TillerError {
  constructor(what = "runtime") {
    super("closed", `${what} is closed`);
  }
}

/** An error the operating system raised for a file operation (ENOSPC, EACCES, EIO...). */
export function isFileSystemError(value: unknown): value is NodeJS.ErrnoException {
  return (
    value instanceof Error &&
    typeof (value as NodeJS.ErrnoException).code === "string" &&
    typeof (value as NodeJS.ErrnoException).syscall === "string"
  );
}

/** `waitForRun` gave up after its `timeoutMs` (the run goes on). */
export class TimeoutError extends TillerError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("timeout", message, details);
  }
}

export function isTillerError(value: unknown): value is TillerError {
  return value instanceof TillerError;
}
