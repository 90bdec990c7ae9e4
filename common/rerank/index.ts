export interface RerankResult {
  /** Position of the document in the list that was sent. */
  index: number;
  relevanceScore: number;
}

/** Reranker port: a cross-encoder behind POST /v1/rerank. Without one, retrieval fuses ranks instead. */
export interface Reranker {
  rerank(query: string, documents: readonly string[], topN: number, signal?: AbortSignal): Promise<RerankResult[]>;
}

