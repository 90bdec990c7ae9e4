import type { Config } from "../config.ts";
import type { LanguageModel } from "./index.ts";
import { createOfflineLanguageModel } from "./offline.ts";
import { createOpenAiLanguageModel, type OpenAiLanguageModelOptions } from "./openai.ts";

/** Knobs the composition root and tests may set; the rest comes from config. */
export type LanguageModelOptions = Omit<OpenAiLanguageModelOptions, "baseURL" | "apiKey" | "chatModel" | "embedModel">;

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
  return createOfflineLanguageModel(options.onUsage ? { onUsage: options.onUsage } : {});
}
