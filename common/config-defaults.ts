// The defaults of every setting the configuration reads (common/config.ts validates the environment
// against them). They sit below everything so that a module whose own options default to a setting
// (the prompt budget, the reranker's model) and the configuration read the same value.

export const DEFAULT_PORT = 3000;
/** Loopback: an unauthenticated API is reachable from the network only when HOST says so (deployments set 0.0.0.0). */
export const DEFAULT_HOST = "127.0.0.1";
export const DEFAULT_DATA_DIR = "./.data";
export const DEFAULT_CHAT_MODEL = "gpt-4o-mini";
export const DEFAULT_EMBED_MODEL = "text-embedding-3-small";
export const DEFAULT_MAX_BOOK_BYTES = 104_857_600;
export const DEFAULT_METRICS_PORT = 9464;
export const DEFAULT_MAX_ATTEMPTS = 3;
/**
 * Model calls in flight per book for the character passes. Each is one short request, and a gateway
 * answers many at once: four at a time left a four-checkpoint book waiting on the model for 7 s of
 * its 9 s. A gateway that refuses more (429) is retried after its Retry-After.
 */
export const DEFAULT_CHARACTER_CONCURRENCY = 16;
/** Longest a reader waits for the first token of a reply before the 502 event; common proxies cut a silent connection at 60 s. */
export const DEFAULT_CHAT_FIRST_TOKEN_TIMEOUT_MS = 60_000;
/** Quiet time after which a chat stream carries an SSE comment; well under the 60 s at which common proxies cut a silent connection. */
export const DEFAULT_SSE_KEEPALIVE_SECONDS = 15;

/**
 * Memory for the books' spoiler-guard data in one API process (api/chat/spoiler-guard-cache.ts): 64 MiB in a
 * container; on an isolate runtime, where an isolate has 128 MB in all and the app itself takes about
 * 33 MiB of it, 16 MiB (measured on workerd: bench/spoiler-guard-edge.ts).
 */
export const DEFAULT_SPOILER_GUARD_CACHE_MB = 64;
export const DEFAULT_EDGE_SPOILER_GUARD_CACHE_MB = 16;

/**
 * The context window the chat's prompts are fitted into. 16k tokens holds every part at its normal
 * size (a persona of a few thousand tokens, five 512-token passages, ten messages, a 4,000-character
 * message, a reply) with room to spare, fits any current chat model (gpt-4o-mini has 128k), and keeps
 * a turn's cost bounded however large the rows behind it grow.
 */
export const DEFAULT_CHAT_CONTEXT_TOKENS = 16_384;
/** Left free for the reply: a thousand tokens is several long paragraphs in character. */
export const DEFAULT_CHAT_REPLY_TOKENS = 1_024;
/**
 * Headings, instructions, the reading-position section and message framing: what is ours, not the
 * rows'. Not a setting: the configuration checks CHAT_CONTEXT_TOKENS leaves room for it.
 */
export const PROMPT_FRAMING_TOKENS = 512;

/**
 * CHARACTER_CHECKPOINTS = n lets a book's character passes cost up to n times the whole book's: up to
 * (n - 1) checkpoints per character on average, placed where each character's material accumulates
 * (ingest/characters/checkpoints.ts). 2 keeps a book within twice the model calls of the whole book alone.
 */
export const DEFAULT_CHARACTER_CHECKPOINTS = 2;

/**
 * The model named when RERANK_MODEL is not set: Cohere's current rerank model. Cohere refuses a
 * request without a model, and servers that host a single model (TEI, Infinity) ignore the name;
 * Jina and Voyage users set their own.
 */
export const DEFAULT_RERANK_MODEL = "rerank-v3.5";

/** The chat session lock's expiry (SPEC: Key-value store keys, 30 s), renewed while a reply streams. */
export const DEFAULT_LOCK_TTL_SECONDS = 30;
