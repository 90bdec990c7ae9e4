/**
 * SIGINT and SIGTERM for a long-running service: the first stops it gracefully, a later one stops it
 * at once. A repeat that comes within `repeatGraceMs` of the first is the same stop asked twice, not
 * an operator's second request: Ctrl-C on a terminal reaches a service started by `npm start` from
 * the terminal (to the whole process group) and again from npm, which forwards it to its script.
 */

export const DEFAULT_REPEAT_GRACE_MS = 1_000;
const SIGNALS = ["SIGINT", "SIGTERM"] as const;
const EXIT_CODES: Record<(typeof SIGNALS)[number], number> = { SIGINT: 130, SIGTERM: 143 };

export interface StopSignalOptions {
  repeatGraceMs?: number;
  /** Where the signals come from and how the process ends; the process itself unless a test says otherwise. */
  target?: { on(signal: (typeof SIGNALS)[number], listener: () => void): unknown };
  now?: () => number;
  exit?: (code: number) => void;
}

export function onStopSignals(stop: (signal: (typeof SIGNALS)[number]) => void, options: StopSignalOptions = {}): void {
  const grace = options.repeatGraceMs ?? DEFAULT_REPEAT_GRACE_MS;
  const target = options.target ?? process;
  const now = options.now ?? (() => performance.now());
  const exit = options.exit ?? ((code: number) => process.exit(code));
  let firstAt: number | undefined;
  for (const signal of SIGNALS) {
    target.on(signal, () => {
      if (firstAt === undefined) {
        firstAt = now();
        stop(signal);
      } else if (now() - firstAt >= grace) exit(EXIT_CODES[signal]);
    });
  }
}
