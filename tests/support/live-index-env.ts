/**
 * Whether the live Qdrant / Typesense suites can run: they need a real server named by the same
 * variables production reads. Each returns the connection or the reason the suite is skipped.
 */
export type LiveTarget = { url: string; apiKey?: string; skip?: undefined } | { skip: string };

function target(urlVariable: string, keyVariable: string, keyRequired: boolean): LiveTarget {
  const url = process.env[urlVariable]?.trim();
  const apiKey = process.env[keyVariable]?.trim() || undefined;
  if (!url) return { skip: `${urlVariable} is not set` };
  if (keyRequired && !apiKey) return { skip: `${keyVariable} is not set (${urlVariable} is)` };
  return { url, ...(apiKey ? { apiKey } : {}) };
}

export const liveQdrant = (): LiveTarget => target("QDRANT_URL", "QDRANT_API_KEY", false);
export const liveTypesense = (): LiveTarget => target("TYPESENSE_URL", "TYPESENSE_API_KEY", true);
