import type { Config } from "../config.ts";
import type { LanguageModel } from "./index.ts";
import type { OfflineLanguageModelOptions } from "./offline.ts";
import { createOpenAiLanguageModel, type OpenAiLanguageModelOptions } from "./gateway.ts";

/** Knobs the composition root and tests may set; the rest comes from config. */
export type LanguageModelOptions = Omit<OpenAiLanguageModelOptions, "baseURL" | "apiKey" | "chatModel" | "embedModel">;

/**
 * The offline provider, loaded on its first call. It counts o200k_base tokens, and loading those
 * tables costs about a second of start-up, which a process talking to a gateway never needs.
 */
function lazyOfflineLanguageModel(options: OfflineLanguageModelOptions): LanguageModel {
  let model: Promise<LanguageModel> | undefined;
  const load = () => (model ??= import("./offline.ts").then((offline) => offline.createOfflineLanguageModel(options)));
  return {
    provider: "offline",
    complete: async (messages, opts) => (await load()).complete(messages, opts),
    async *stream(messages, opts) {
      yield* (await load()).stream(messages, opts);
    },
    embed: async (texts, opts) => (await load()).embed(texts, opts),
  };
}

/** Picks the LLM adapter: the OpenAI-compatible gateway when LLM_GATEWAY_URL is set, else the offline provider. */
export function createLanguageModel(config: Config["llm"], options: LanguageModelOptions = {}): LanguageModel {
  if (config.gatewayUrl) {
    return createOpenAiLanguageModel({
      ...options,
      baseURL: config.gatewayUrl,
      ...(config.apiKey ? { apiKey: config.apiKey } : {}),
      chatModel: config.chatModel,
      embedModel: config.embedModel,
    });
  }
  // The gateway's transport knobs (fetch, timeouts, retries, batches) mean nothing without a gateway.
  return lazyOfflineLanguageModel(options.onUsage ? { onUsage: options.onUsage } : {});
}
