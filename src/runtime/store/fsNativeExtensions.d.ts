/** The part of fs-native-extensions (no types of its own) that store/lock.ts uses. */
declare module "fs-native-extensions" {
  /**
   * An exclusive lock on the whole file open as `fd`, without waiting: true when taken, false when another open file
   * holds one (EAGAIN); throws on any other error. Linux: `fcntl(F_OFD_SETLK)`; macOS: `flock(LOCK_EX | LOCK_NB)`.
   */
  export function tryLock(fd: number): boolean;
}
