/**
 * One error type for every HTTP service we call (LLM gateway, reranker, Qdrant, Typesense, book
 * downloads), and the helpers that map failures onto it, so callers branch on `kind`, never on
 * vendor error classes.
 */

export type UpstreamService = "llm" | "rerank" | "qdrant" | "typesense" | "download";
export type UpstreamErrorKind = "http" | "timeout" | "aborted" | "connection" | "invalid_response";

export class UpstreamError extends Error {
  readonly status: number | undefined;

  constructor(
    readonly service: UpstreamService,
    readonly kind: UpstreamErrorKind,
    message: string,
    options: { status?: number; cause?: unknown } = {},
  ) {
    super(`${service}: ${message}`, { cause: options.cause });
    this.name = "UpstreamError";
    this.status = options.status;
  }

  /** Worth another try: timeouts, dropped connections, 408/409/429 and 5xx. */
  get retryable(): boolean {
    if (this.kind === "timeout" || this.kind === "connection") return true;
    if (this.kind !== "http" || this.status === undefined) return false;
    return this.status === 408 || this.status === 409 || this.status === 429 || this.status >= 500;
  }
}

/** Maps a thrown fetch/SDK error (or anything else) to an UpstreamError. */
export function toUpstreamError(service: UpstreamService, err: unknown, signal?: AbortSignal): UpstreamError {
  if (err instanceof UpstreamError) return err;
  const e = (err ?? {}) as { name?: unknown; message?: unknown; status?: unknown; code?: unknown };
  const message = typeof e.message === "string" ? e.message : String(err);
  const name = typeof e.name === "string" ? e.name : "";
  if (signal?.aborted || name === "AbortError" || /abort/i.test(name)) {
    const timedOut = signal?.reason instanceof Error && signal.reason.name === "TimeoutError";
    return new UpstreamError(service, timedOut ? "timeout" : "aborted", message, { cause: err });
  }
  if (name === "TimeoutError" || /timed? ?out/i.test(name) || /timed? ?out/i.test(message)) {
    return new UpstreamError(service, "timeout", message, { cause: err });
  }
  if (typeof e.status === "number") {
    return new UpstreamError(service, "http", message, { status: e.status, cause: err });
  }
  if (name === "SyntaxError") return new UpstreamError(service, "invalid_response", message, { cause: err });
  return new UpstreamError(service, "connection", message, { cause: err });
}

/** Builds the error for a non-2xx response, keeping a short excerpt of the body for the log. */
export async function upstreamErrorFromResponse(service: UpstreamService, res: Response): Promise<UpstreamError> {
  let excerpt = "";
  try {
    excerpt = (await res.text()).slice(0, 300);
  } catch {
    // the body is only for the message
  }
  return new UpstreamError(service, "http", `HTTP ${res.status}${excerpt ? `: ${excerpt}` : ""}`, { status: res.status });
}

export interface RetryOptions {
  /** Further tries after the first. */
  maxRetries: number;
  /** First back-off; doubles each retry, with jitter. */
  baseDelayMs?: number;
  signal?: AbortSignal;
  /** Decides whether an error is worth another try; UpstreamError.retryable by default. */
  shouldRetry?: (err: unknown) => boolean;
  sleep?: (ms: number) => Promise<void>;
}

export const DEFAULT_RETRY_BASE_DELAY_MS = 250;

const defaultShouldRetry = (err: unknown) => err instanceof UpstreamError && err.retryable;

/** Calls fn until it succeeds, a non-retryable error occurs, or the retries are spent. */
export async function withRetries<T>(fn: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const shouldRetry = options.shouldRetry ?? defaultShouldRetry;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const base = options.baseDelayMs ?? DEFAULT_RETRY_BASE_DELAY_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      if (attempt >= options.maxRetries || options.signal?.aborted || !shouldRetry(err)) throw err;
      await sleep(base * 2 ** attempt * (0.5 + Math.random() / 2));
    }
  }
}
