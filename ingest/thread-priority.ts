import { readlinkSync } from "node:fs";
import { getPriority, setPriority } from "node:os";

/**
 * The niceness of a thread whose work is not on a book's critical path (the index's text work): on a
 * machine with as many busy threads as cores it takes about a tenth of a core from the NLP step
 * instead of half, and the whole of any core nobody else uses.
 */
export const BACKGROUND_NICENESS = 10;

/**
 * Lowers the calling thread's scheduling priority and returns its niceness. On Linux a thread has a
 * nice value of its own, set through its id (found in /proc/thread-self); a process may always lower
 * its own priority. Elsewhere, or where the system refuses, nothing changes and the result is undefined.
 */
export function lowerThreadPriority(niceness = BACKGROUND_NICENESS): number | undefined {
  try {
    const tid = Number(readlinkSync("/proc/thread-self").split("/").pop());
    if (!Number.isInteger(tid) || tid <= 0) return undefined;
    if (getPriority(tid) < niceness) setPriority(tid, niceness);
    return getPriority(tid);
  } catch {
    return undefined;
  }
}
