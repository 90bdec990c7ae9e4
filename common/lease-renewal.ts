/**
 * Keeping a lease alive while its holder works past the expiry it was taken with: the chat's session
 * lock (common/kv/lock.ts) and the ingest worker's job leases (ingest/jobs/lease-keeper.ts, and its
 * thread, ingest/jobs/lease-thread.ts). Callers renew several times per expiry, so that one late or
 * failed renewal still leaves time for the next; a failure is reported and left to the next interval.
 */

export interface RenewalOptions {
  everyMs: number;
  /** One renewal: true while the lease is still ours, false once it is lost. Rejects when the store failed. */
  renew: () => Promise<boolean>;
  /** The lease was lost: another holder may have it now. Renewals stop. */
  onLost?: () => void;
  /** One renewal failed; the next interval tries again. */
  onError?: (error: unknown) => void;
}

export interface Renewal {
  /** Renews at once, besides the interval's renewals. */
  renewNow(): Promise<void>;
  /** Stops renewing, and reporting what a renewal still in flight finds: the holder has let go. */
  stop(): void;
}

export function keepRenewing(options: RenewalOptions): Renewal {
  let stopped = false;
  const renewNow = async () => {
    if (stopped) return;
    let held: boolean;
    try {
      held = await options.renew();
    } catch (error) {
      if (!stopped) options.onError?.(error);
      return;
    }
    if (held || stopped) return;
    stop();
    options.onLost?.();
  };
  const timer = setInterval(() => void renewNow(), options.everyMs);
  const stop = () => {
    stopped = true;
    clearInterval(timer);
  };
  return { renewNow, stop };
}
