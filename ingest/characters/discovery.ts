import { buildDiscoveryMessages, DISCOVERY_TEMPERATURE, parseDiscovery } from "../../common/prompt/character.ts";
import { type BookInfo } from "../../common/llm/prompt-format.ts";
import { chunkText, DEFAULT_CHUNK_TOKENS } from "../../common/chunking.ts";
import type { LanguageModel } from "../../common/llm/index.ts";
import { spread } from "./character-lines.ts";
import type { SampledDiscovery } from "./discovered-characters.ts";

/**
 * Character discovery for books BookNLP cannot read (Urdu, or English and Urdu together): chunks
 * sampled from beginning to end go to the model a few at a time, each call answering with the
 * characters it sees. ingest/characters/discovered-characters.ts merges the answers.
 */

export const DEFAULT_DISCOVERY_SAMPLES = 12;
export const DEFAULT_SAMPLES_PER_CALL = 3;
/** A window this many characters per budget token always holds at least one whole chunk. */
const WINDOW_CHARS_PER_TOKEN = 8;
/** How far a sample's start may move forward to begin at a paragraph. */
const PARAGRAPH_SEARCH_CHARS = 2_000;

/**
 * `count` chunk-sized samples spread evenly over the text. Each is the first chunk of a window that
 * starts at a paragraph, so no sample begins mid-sentence; a short book gives all of its chunks.
 */
export function sampleText(text: string, count: number, chunkTokens: number = DEFAULT_CHUNK_TOKENS): string[] {
  const windowChars = chunkTokens * WINDOW_CHARS_PER_TOKEN;
  if (text.length <= windowChars * count) {
    return spread(Array.from(chunkText(text, { chunkTokens }), (c) => c.text), count);
  }
  const samples: string[] = [];
  for (let i = 0; i < count; i++) {
    let start = Math.floor((i * (text.length - windowChars)) / Math.max(1, count - 1));
    // Searched within its reach only: a book with no blank line would be read to its end for each sample.
    const paragraph = text.slice(start, start + PARAGRAPH_SEARCH_CHARS + 1).indexOf("\n\n");
    if (i > 0 && paragraph >= 0) start += paragraph;
    const first = chunkText(text.slice(start, start + windowChars), { chunkTokens }).next();
    if (!first.done && !samples.includes(first.value.text)) samples.push(first.value.text);
  }
  return samples;
}

/** Groups of samples, one discovery call each. */
export function discoveryCalls(samples: readonly string[], perCall: number = DEFAULT_SAMPLES_PER_CALL): string[][] {
  const calls: string[][] = [];
  for (let i = 0; i < samples.length; i += perCall) calls.push(samples.slice(i, i + perCall));
  return calls;
}

/** One discovery call: the characters the model sees in these samples. */
export async function discoverInSamples(
  llm: LanguageModel,
  book: BookInfo,
  language: string,
  samples: readonly string[],
  signal?: AbortSignal,
): Promise<SampledDiscovery> {
  const messages = buildDiscoveryMessages({ book, language, samples: [...samples] });
  const answer = await llm.complete(messages, {
    purpose: "characters",
    temperature: DISCOVERY_TEMPERATURE,
    json: true,
    ...(signal ? { signal } : {}),
  });
  return { samples, answer: parseDiscovery(answer) };
}
