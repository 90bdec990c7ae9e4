/**
 * What the services (api/chat, api/processing) throw when a request cannot be served. They name what
 * went wrong, not how HTTP says it: api/errors.ts gives each its status. The message is what the
 * caller reads in `{error}`; `cause` is for the log only.
 */

/** What the request names does not exist, or is not the caller's (told apart from nothing). */
export class NotFoundError extends Error {
  override name = "NotFoundError";
}

/** The request is well formed but names something that cannot be used: a book not in the database, a file that is no book. */
export class UnusableInputError extends Error {
  override name = "UnusableInputError";
}

/** A store the service needs (the database, the queue) failed; the message names which, nothing of its internals. */
export class StoreUnavailableError extends Error {
  override name = "StoreUnavailableError";
}
