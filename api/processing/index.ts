import { Elysia } from "elysia";
import { ErrorBody, errorBodyFor, ProcessingAccepted, ProcessingRequest } from "../../common/contract/schemas.ts";
import { MAX_REQUEST_BODY_BYTES, parseJsonBody } from "../json-body.ts";
import { FOREIGN_ORIGIN_EXAMPLE, GUARD_REFUSALS_DOC, NOT_JSON_ERROR } from "../request-guard.ts";
import { submitBook, type ProcessingDeps } from "./service.ts";

export function processingRoutes(deps: ProcessingDeps) {
  return new Elysia({ name: "processing" }).post(
    "/character/processing",
    async ({ body, status }) => status(202, await submitBook(deps, body)),
    {
      parse: [parseJsonBody, "json"],
      body: ProcessingRequest,
      response: {
        202: ProcessingAccepted,
        400: ErrorBody,
        403: errorBodyFor(FOREIGN_ORIGIN_EXAMPLE),
        413: errorBodyFor(`request body is larger than ${MAX_REQUEST_BODY_BYTES} bytes`),
        415: errorBodyFor(NOT_JSON_ERROR),
        422: errorBodyFor("book not found"),
        500: errorBodyFor("database unavailable"),
      },
      detail: {
        tags: ["Books"],
        summary: "Queue a book for ingestion",
        description: `Checks the request and the file before queueing, so that a bad book is refused now rather than failing later:

- **400**: malformed JSON, or a field missing or of the wrong type (the message names the field).
${GUARD_REFUSALS_DOC}
- **413**: the body is larger than 1 MiB.
- **422**: the book is not in the database; \`file_url\` is not http(s), does not end in \`.txt\` or \`.md\`, names a host
  that is or resolves to a loopback, private, link-local or metadata address (unless listed in \`FILE_URL_ALLOWED_HOSTS\`),
  cannot be downloaded within 120 s, is larger than \`MAX_BOOK_BYTES\`, or is not text (a PDF, an archive, an image or
  other binary; UTF-8, UTF-16 with a byte order mark and Windows-1252 are text).
- **500**: the database or the queue is unavailable (no internals in the message).

On success the job \`{book_id, file_url, user_id, enqueued_at, job_id}\` is pushed onto the \`processing_queue\` list
and an ingest worker picks it up.`,
      },
    },
  );
}
