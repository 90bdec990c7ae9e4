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

export type LeaseThreadMessage =
  | { kind: "start"; kv: KvConfig; everyMs: number; maxSilenceMs: number }
  | { kind: "hold"; id: string; key: string; token: string; seconds: number }
  | { kind: "release"; id: string }
  /** The main thread is alive; sent on its own timer. */
  | { kind: "alive" };

export type LeaseThreadReply = { kind: "lost"; id: string } | { kind: "failed"; id: string; error: string };

if (parentPort) {
  const port = parentPort;
  const leases = new Map<string, { key: string; token: string; seconds: number }>();
  let heard = Date.now();
  port.on("message", (message: LeaseThreadMessage) => {
    heard = Date.now();
    switch (message.kind) {
      case "start": {
        const kv = createKeyValueStore(message.kv);
        const renew = async () => {
          if (Date.now() - heard > message.maxSilenceMs) return;
          for (const [id, lease] of leases) {
            try {
              if (!(await kv.expireIfEquals(lease.key, lease.token, lease.seconds))) {
                leases.delete(id);
                port.postMessage({ kind: "lost", id } satisfies LeaseThreadReply);
              }
            } catch (err) {
              port.postMessage({ kind: "failed", id, error: err instanceof Error ? err.message : String(err) } satisfies LeaseThreadReply);
            }
          }
        };
        setInterval(() => void renew(), message.everyMs);
        break;
      }
      case "hold":
        leases.set(message.id, { key: message.key, token: message.token, seconds: message.seconds });
        break;
      case "release":
        leases.delete(message.id);
        break;
      case "alive":
        break;
    }
  });
}
