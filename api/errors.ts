import { NotFoundError, StoreUnavailableError, UnusableInputError } from "./service-errors.ts";

/**
 * The error class the HTTP layer (routes, the body parser) throws to produce an HTTP error. Its
 * message is what the caller reads in `{error}`; `cause` is for the log only.
 */
export class HttpError extends Error {
  constructor(
    readonly status: 400 | 404 | 413 | 415 | 422 | 429 | 500 | 502 | 503,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "HttpError";
  }
}

/** The status each of the services' errors (api/service-errors.ts) answers with. */
const SERVICE_ERROR_STATUSES = [
  [NotFoundError, 404],
  [UnusableInputError, 422],
  [StoreUnavailableError, 500],
] as const;

/** An HttpError as thrown, a service's error as the HttpError it answers with; undefined for any other error. */
export function asHttpError(error: unknown): HttpError | undefined {
  if (error instanceof HttpError) return error;
  const status = SERVICE_ERROR_STATUSES.find(([type]) => error instanceof type)?.[1];
  return status && error instanceof Error ? new HttpError(status, error.message, { cause: error.cause }) : undefined;
}
