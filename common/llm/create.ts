import type { Config } from "../config.ts";
import type { LanguageModel } from "./index.ts";
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
  return createOfflineLanguageModel(config, options);
}

/** Seam for the deterministic offline provider used when no gateway is configured. */
function createOfflineLanguageModel(_config: Config["llm"], _options: LanguageModelOptions): LanguageModel {
  throw new Error("offline provider not built yet");
}
