// The key-value store's chat keys (SPEC: Key-value store keys). The chat caches under them
// (api/chat/chat-cache.ts); ingestion drops them when it rewrites or removes what they cache.

export const characterCacheKey = (characterId: string) => `chat:char:${characterId}`;
export const sessionCacheKey = (sessionId: string) => `chat:sess:${sessionId}`;
export const bookCacheKey = (bookId: string) => `chat:book:${bookId}`;
/** Spoiler-safe chat, read only for a reader with a position: the book's chunk ends and checkpoints. */
export const readingPositionsCacheKey = (bookId: string) => `chat:positions:${bookId}`;
/** Spoiler-safe chat: a character's first appearance and checkpoint profiles and personas. */
export const knowledgeCacheKey = (characterId: string) => `chat:knowledge:${characterId}`;
