/**
 * One error type for every HTTP service we call (LLM gateway, reranker, Qdrant, Typesense, book
 * downloads), and the helpers that map failures onto it, so callers branch on `kind`, never on
 * vendor error classes.
 */

import { retry } from "./retry.ts";

export type UpstreamService = "llm" | "rerank" | "qdrant" | "typesense" | "download";
export type UpstreamErrorKind = "http" | "timeout" | "aborted" | "connection" | "invalid_response";

export class UpstreamError extends Error {
  readonly status: number | undefined;
  /** How long the service asked us to wait before trying again (Retry-After), when it said. */
  readonly retryAfterMs: number | undefined;

  constructor(
    readonly service: UpstreamService,
    readonly kind: UpstreamErrorKind,
    message: string,
    options: { status?: number; retryAfterMs?: number; cause?: unknown } = {},
  ) {
    super(`${service}: ${message}`, { cause: options.cause });
    this.name = "UpstreamError";
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
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

/** Milliseconds from `retry-after-ms` (OpenAI-style gateways) or `retry-after` (seconds or an HTTP date). */
export function retryAfterMs(headers: Headers, now = Date.now()): number | undefined {
  const ms = Number(headers.get("retry-after-ms") ?? NaN);
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const after = headers.get("retry-after");
  if (after === null || after.trim() === "") return undefined;
  const seconds = Number(after);
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds * 1000 : undefined;
  const date = Date.parse(after);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Builds the error for a non-2xx response, keeping a short excerpt of the body for the log. */
export async function upstreamErrorFromResponse(service: UpstreamService, res: Response): Promise<UpstreamError> {
  let excerpt = "";
  try {
    excerpt = (await res.text()).slice(0, 300);
  } catch {
    // the body is only for the message
  }
  const wait = retryAfterMs(res.headers);
  return new UpstreamError(service, "http", `HTTP ${res.status}${excerpt ? `: ${excerpt}` : ""}`, { status: res.status, ...(wait === undefined ? {} : { retryAfterMs: wait }) });
}

export interface RequestJsonOptions {
  /** POST unless set. */
  method?: "GET" | "POST";
  headers: Record<string, string>;
  /** The request body, already serialised. */
  body?: string;
  /** Bounds the whole attempt: connecting, the headers and reading the body. */
  timeoutMs: number;
  signal?: AbortSignal;
  fetch?: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
}

/**
 * One request whose answer is JSON, every failure an UpstreamError: a non-2xx status (with its
 * Retry-After), a timeout, the caller's abort, a dropped connection, a body that is not JSON.
 */
export async function requestJson(service: UpstreamService, url: string, options: RequestJsonOptions): Promise<unknown> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  try {
    const res = await (options.fetch ?? fetch)(url, {
      method: options.method ?? "POST",
      headers: options.headers,
      ...(options.body === undefined ? {} : { body: options.body }),
      signal,
    });
    if (!res.ok) throw await upstreamErrorFromResponse(service, res);
    return await res.json();
  } catch (err) {
    throw toUpstreamError(service, err, signal);
  }
}

export interface UpstreamRetryOptions {
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
/** The longest Retry-After honoured; a longer one gets the usual back-off instead. */
export const MAX_RETRY_AFTER_MS = 60_000;

const defaultShouldRetry = (err: unknown) => err instanceof UpstreamError && err.retryable;

/** The wait an UpstreamError's Retry-After asked for, when it asked for one we honour. */
function askedDelay(err: unknown): number | undefined {
  const asked = err instanceof UpstreamError ? err.retryAfterMs : undefined;
  return asked !== undefined && asked <= MAX_RETRY_AFTER_MS ? asked : undefined;
}

/**
 * Calls fn until it succeeds, a non-retryable error occurs, or the retries are spent. Between tries it
 * waits as long as the service's Retry-After asked, or else backs off exponentially with jitter.
 */
export function withRetries<T>(fn: (attempt: number) => Promise<T>, options: UpstreamRetryOptions): Promise<T> {
  return retry(fn, {
    attempts: options.maxRetries + 1,
    firstDelayMs: options.baseDelayMs ?? DEFAULT_RETRY_BASE_DELAY_MS,
    jitter: true,
    delayOf: askedDelay,
    shouldRetry: options.shouldRetry ?? defaultShouldRetry,
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.sleep ? { sleep: options.sleep } : {}),
  });
}
