import { Elysia } from "elysia";
import { z } from "zod";
import {
  ChatDoneEvent,
  ChatErrorEvent,
  ChatEvent,
  ChatRequest,
  ChatTokenEvent,
  ErrorBody,
  errorBodyFor,
  MAX_PREFERENCES_CHARS,
  MAX_USER_MESSAGE_CHARS,
} from "../../common/contract/schemas.ts";
import { toOpenApiSchema } from "../docs.ts";
import { MAX_REQUEST_BODY_BYTES, parseJsonBody } from "../json-body.ts";
import { FOREIGN_ORIGIN_EXAMPLE, GUARD_REFUSALS_DOC, NOT_JSON_ERROR } from "../request-guard.ts";
import { formatSseEvent, sseResponse, type SseResponseOptions } from "../sse.ts";
import { SAVE_ATTEMPTS } from "./save.ts";
import { MODEL_FAILED, SESSION_BUSY, type ChatService } from "./turn.ts";
import { CHARACTER_NOT_IN_BOOK, SESSION_NOT_FOUND } from "./refusal.ts";

/** Sent by the frontend; the body's user_id is what counts (internal network, trusted body). */
const ChatHeaders = z.looseObject({
  "x-user-id": z.string().optional().meta({ description: "Accepted and ignored: the body's `user_id` identifies the reader." }),
  "x-api-key": z.string().optional().meta({ description: "Accepted and ignored: this internal service has no authentication of its own." }),
});

const exampleStream = [
  formatSseEvent({ token: "I" }),
  formatSseEvent({ token: " thought him" }),
  formatSseEvent({ token: " proud." }),
  formatSseEvent({ done: true, full_response: "I thought him proud.", sources: [{ chunk_index: 12, score: 0.91 }] }),
].join("");

const DESCRIPTION = `Streams the character's reply as Server-Sent Events. Every event is one line \`data: <JSON>\` followed by a
blank line; a token containing line breaks or the text \`data:\` stays inside its event's JSON. For example:

\`\`\`
${exampleStream.trimEnd()}
\`\`\`

The stream starts at once with an SSE comment line (\`: stream open\`) and carries a comment (\`: keep-alive\`)
whenever no event has been sent for \`SSE_KEEPALIVE_SECONDS\` (15 s); SSE clients ignore comment lines.

Events, in order: any number of \`{token}\`, then exactly one of \`{done: true, full_response, sources}\` (the tokens
concatenate to \`full_response\`; \`sources\` lists the book passages used, best first) or \`{error, code}\`, then the
stream ends:

- \`code: 429\`: another reply is being written in this session (the lock is renewed while that reply streams,
  and lapses 30 s after a holder that died). A message
  sent while the previous reply's conversation summary is still being updated is not refused: it waits for the
  update (a second or two) and then answers with it.
- \`code: 502\`: the language model failed before or during the reply, gave no first token within
  \`CHAT_FIRST_TOKEN_TIMEOUT_MS\` (60 s) of the message, or the reply could not be saved (tried ${SAVE_ATTEMPTS} times
  over about 2 s; the tokens already sent are the whole reply, and the message can be sent again).

For a reader with a position, a reply that is about to name a character the reader has not met, or to quote 8
words the book has only after the position, is stopped there and ends with the token \`… but that is a story for
the pages you have yet to read.\` (then \`done\` as usual, its \`full_response\` what was sent).

After an error event nothing of the exchange is saved. \`done\` is sent once the user message and the reply have
been saved (the session's \`message_count\` grows by one and its \`preview\` is the start of the reply, ending in "…").
A client that disconnects cancels the model's generation and nothing is saved.

Before the stream begins, the request can fail with an ordinary JSON error:

- **400**: malformed JSON, a field missing or of the wrong type, a blank \`user_message\` or one longer than
  ${MAX_USER_MESSAGE_CHARS} characters, \`preferences\` longer than ${MAX_PREFERENCES_CHARS} characters.
${GUARD_REFUSALS_DOC}
- **413**: the body is larger than 1 MiB.
- **404**: \`{"error": "${SESSION_NOT_FOUND}"}\` when the session does not exist or belongs to another user, character
  or book; \`character not found\` or \`book not found\` when those are missing; \`${CHARACTER_NOT_IN_BOOK}\` when the
  session's book is not its character's book.
- **500**: the database is unavailable.

How the reply is grounded: the message is rewritten into a narrative and a keyword query (cached), both searched
in the book (vector and BM25 search in parallel), the passages reranked against the reader's own message when a
reranker key is configured (rank-fused otherwise), and the character answers with a system message of its persona,
the reader's preferences for it (or the \`preferences\` override), the numbered passages and the conversation
summary (on a first turn, saying there is none yet).`;

const eventExample = (summary: string, value: object) => ({ summary, value });

/** `POST /character/chat`: the checks that can still answer with an HTTP status, then the stream (kept alive as `stream` says). */
export function chatRoutes(service: ChatService, stream: Pick<SseResponseOptions, "keepAliveMs"> = {}) {
  return new Elysia({ name: "chat" }).post(
    "/character/chat",
    async ({ body, request }) => {
      const receivedAt = performance.now();
      const turn = await service.open(body, receivedAt);
      const client = new AbortController();
      const leave = (reason: unknown) => client.abort(reason);
      request.signal.addEventListener("abort", () => leave(request.signal.reason), { once: true });
      return sseResponse(service.reply(turn, client.signal), { ...stream, onCancel: leave });
    },
    {
      parse: [parseJsonBody, "json"],
      body: ChatRequest,
      headers: ChatHeaders,
      detail: {
        tags: ["Chat"],
        summary: "Chat with a character (Server-Sent Events)",
        description: DESCRIPTION,
        responses: {
          200: {
            description: "The reply as a stream of `data: <JSON>` events; each event's JSON is one of the schemas below.",
            content: {
              "text/event-stream": {
                schema: toOpenApiSchema(ChatEvent),
                examples: {
                  token: eventExample("A piece of the reply", ChatTokenEvent.parse({ token: " thought him" })),
                  done: eventExample(
                    "The last event of a successful reply",
                    ChatDoneEvent.parse({ done: true, full_response: "I thought him proud.", sources: [{ chunk_index: 12, score: 0.91 }] }),
                  ),
                  busy: eventExample("The session is busy with another reply", ChatErrorEvent.parse({ error: SESSION_BUSY, code: 429 })),
                  failed: eventExample(
                    "The language model failed",
                    ChatErrorEvent.parse({ error: MODEL_FAILED, code: 502 }),
                  ),
                },
              },
            },
          },
          400: { description: "The body is not a valid chat request.", content: { "application/json": { schema: toOpenApiSchema(ErrorBody) } } },
          403: {
            description: "The Host is not an allowed name, or a browser page of another origin sent the request.",
            content: { "application/json": { schema: toOpenApiSchema(errorBodyFor(FOREIGN_ORIGIN_EXAMPLE)) } },
          },
          413: {
            description: "The body is larger than 1 MiB.",
            content: { "application/json": { schema: toOpenApiSchema(errorBodyFor(`request body is larger than ${MAX_REQUEST_BODY_BYTES} bytes`)) } },
          },
          415: { description: "The body is not sent as application/json.", content: { "application/json": { schema: toOpenApiSchema(errorBodyFor(NOT_JSON_ERROR)) } } },
          404: {
            description: "No such session for this user, character and book; or the character or the book does not exist.",
            content: {
              "application/json": { schema: toOpenApiSchema(ErrorBody), example: { error: SESSION_NOT_FOUND } },
            },
          },
          500: { description: "The database is unavailable.", content: { "application/json": { schema: toOpenApiSchema(errorBodyFor("database unavailable")) } } },
        },
      },
    },
  );
}
