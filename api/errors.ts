/**
 * The one error class routes and services throw to produce an HTTP error. Its message is what the
 * caller reads in `{error}`; `cause` is for the log only.
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
