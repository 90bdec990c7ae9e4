import { Worker } from "node:worker_threads";
import type { KvConfig } from "../../common/config.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { leaseKey, type ClaimedJob, type ReliableQueue } from "../../common/queue.ts";
import { keepRenewing, type Renewal } from "../../common/lease-renewal.ts";
import type { LeaseThreadMessage, LeaseThreadReply } from "./lease-thread.ts";

/**
 * Keeps the leases of the jobs a worker runs alive. A lease renewed by a timer on the main thread
 * lapses whenever a step keeps that thread busy past the visibility timeout: the reaper of another
 * worker then hands the job out again and counts an attempt, for the book that was busy and for every
 * book running beside it. So with a shared store (Redis, Upstash) the renewals run in a worker thread
 * of their own (lease-thread.ts), with its own connection and timer, which no step on the main thread
 * can starve.
 *
 * The in-process store lives on the main thread, where a thread cannot reach it, and no other process
 * can reap its jobs. There the main thread's timer renews the leases; after a busy step it takes a
 * lapsed lease again when no reaper handed the job back meanwhile (a reaper waits `claimGraceMs` after
 * first seeing a job without a lease), and it renews them all before this worker reaps, so a busy
 * step costs no attempt there either.
 */

/** Renewals per visibility timeout, so a late or failed renewal still leaves time for the next. */
export const RENEWALS_PER_LEASE = 3;
/**
 * A main thread silent this long is stuck, not busy: the thread stops renewing its leases, and
 * another worker takes its jobs once they lapse. Far above any step of the largest book.
 */
export const DEFAULT_MAX_SILENCE_MS = 15 * 60_000;

export interface LeaseKeeperOptions {
  /** The store's configuration, for the thread's own connection; the thread is used only when it names `kv`'s driver. */
  kvConfig: KvConfig;
  maxSilenceMs?: number;
}

export interface LeaseEvents {
  /** The lease was found taken: the job is no longer this worker's. */
  lost(): void;
  /** A renewal failed; the next one is tried at its interval. */
  failed(error: unknown): void;
}

export interface LeaseKeeper {
  /** "thread" when the renewals run in their own worker thread. */
  readonly where: "thread" | "main";
  /** Keeps the claim's lease alive until the returned function is called. */
  hold(claim: ClaimedJob, events: LeaseEvents): () => void;
  /** Renews every lease held now (before a reap on the main thread). */
  renewAll(): Promise<void>;
  close(): Promise<void>;
}

export function createLeaseKeeper(queue: ReliableQueue, kv: KeyValueStore, options: LeaseKeeperOptions): LeaseKeeper {
  const everyMs = (queue.visibilityTimeoutSeconds * 1000) / RENEWALS_PER_LEASE;

  if (kv.driver === "memory" || kv.driver !== options.kvConfig.driver) {
    const renewals = new Map<string, Renewal>();
    return {
      where: "main",
      hold(claim, events) {
        const id = claim.token;
        renewals.set(
          id,
          keepRenewing({
            everyMs,
            // A lease that lapsed while this thread was busy is taken again if no reaper took the job.
            renew: async () => (await queue.renew(claim)) || (await queue.reclaim(claim)),
            onLost: () => {
              renewals.delete(id);
              events.lost();
            },
            onError: (err) => events.failed(err),
          }),
        );
        return () => {
          renewals.get(id)?.stop();
          renewals.delete(id);
        };
      },
      async renewAll() {
        await Promise.all([...renewals.values()].map((renewal) => renewal.renewNow()));
      },
      async close() {
        for (const renewal of renewals.values()) renewal.stop();
        renewals.clear();
      },
    };
  }

  const held = new Map<string, LeaseEvents>();
  const thread = new Worker(new URL("./lease-thread.ts", import.meta.url));
  // The thread never keeps the process alive on its own; the worker's loop does.
  thread.unref();
  const post = (message: LeaseThreadMessage) => thread.postMessage(message);
  post({ kind: "start", kv: options.kvConfig, everyMs, maxSilenceMs: options.maxSilenceMs ?? DEFAULT_MAX_SILENCE_MS });
  thread.on("message", (reply: LeaseThreadReply) => {
    const events = held.get(reply.id);
    if (!events) return;
    if (reply.kind === "lost") {
      held.delete(reply.id);
      events.lost();
    } else events.failed(new Error(reply.error));
  });
  thread.on("error", (err: Error) => {
    for (const events of held.values()) events.failed(err);
  });
  const alive = setInterval(() => post({ kind: "alive" }), everyMs);
  alive.unref();
  return {
    where: "thread",
    hold(claim, events) {
      const id = claim.token;
      held.set(id, events);
      post({ kind: "hold", id, key: leaseKey(queue.keys, claim.job), token: claim.token, seconds: queue.visibilityTimeoutSeconds });
      return () => {
        held.delete(id);
        post({ kind: "release", id });
      };
    },
    async renewAll() {
      // The thread renews on its own timer.
    },
    async close() {
      clearInterval(alive);
      held.clear();
      await thread.terminate();
    },
  };
}
