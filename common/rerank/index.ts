export interface RerankResult {
  /** Position of the document in the list that was sent. */
  index: number;
  relevanceScore: number;
}

/** Reranker port: a cross-encoder behind POST /v1/rerank. Without one, retrieval fuses ranks instead. */
export interface Reranker {
  rerank(query: string, documents: readonly string[], topN: number, signal?: AbortSignal): Promise<RerankResult[]>;
}

/**
 * The model named when RERANK_MODEL is not set: Cohere's current rerank model. Cohere refuses a
 * request without a model, and servers that host a single model (TEI, Infinity) ignore the name;
 * Jina and Voyage users set their own.
 */
export const DEFAULT_RERANK_MODEL = "rerank-v3.5";
