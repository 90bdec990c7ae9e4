/**
 * Worker-thread entry that keeps the ingest worker's job leases alive (see lease-keeper.ts). It has
 * its own connection to the key-value store and its own timer, so a step that keeps the main thread
 * busy for minutes (a hostile book's text, a large book's guard data) cannot starve the renewals.
 * It renews a lease only while the main thread still answers: one silent for `maxSilenceMs` is stuck,
 * not busy, and its leases lapse so that another worker takes the job.
 */
import { parentPort } from "node:worker_threads";
import type { KvConfig } from "../../common/config.ts";
import { createKeyValueStore } from "../../common/kv/create.ts";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { keepRenewing, type Renewal } from "../../common/lease-renewal.ts";

export type LeaseThreadMessage =
  | { kind: "start"; kv: KvConfig; everyMs: number; maxSilenceMs: number }
  | { kind: "hold"; id: string; key: string; token: string; seconds: number }
  | { kind: "release"; id: string }
  /** The main thread is alive; sent on its own timer. */
  | { kind: "alive" };

export type LeaseThreadReply = { kind: "lost"; id: string } | { kind: "failed"; id: string; error: string };

if (parentPort) {
  const port = parentPort;
  const renewals = new Map<string, Renewal>();
  let heard = Date.now();
  let started: { kv: KeyValueStore; everyMs: number; maxSilenceMs: number } | undefined;
  port.on("message", (message: LeaseThreadMessage) => {
    heard = Date.now();
    switch (message.kind) {
      case "start":
        started = { kv: createKeyValueStore(message.kv), everyMs: message.everyMs, maxSilenceMs: message.maxSilenceMs };
        break;
      case "hold": {
        if (!started) throw new Error("lease thread: a lease held before the thread was started");
        const { kv, everyMs, maxSilenceMs } = started;
        const { id, key, token, seconds } = message;
        renewals.set(
          id,
          keepRenewing({
            everyMs,
            // A silent main thread's lease is neither renewed nor reported: it lapses, and another worker takes the job.
            renew: async () => Date.now() - heard > maxSilenceMs || (await kv.expireIfEquals(key, token, seconds)),
            onLost: () => {
              renewals.delete(id);
              port.postMessage({ kind: "lost", id } satisfies LeaseThreadReply);
            },
            onError: (err) => port.postMessage({ kind: "failed", id, error: err instanceof Error ? err.message : String(err) } satisfies LeaseThreadReply),
          }),
        );
        break;
      }
      case "release":
        renewals.get(message.id)?.stop();
        renewals.delete(message.id);
        break;
      case "alive":
        break;
    }
  });
}
