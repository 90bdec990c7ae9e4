import { buildExtractionMessages, buildPersonaMessages, EXTRACTION_TEMPERATURE, InvalidLlmOutputError, parseProfile, PERSONA_TEMPERATURE, withoutNul } from "../../common/prompt/character.ts";
import { type BookInfo, type CharacterProfile } from "../../common/llm/prompt-format.ts";
import type { LanguageModel } from "../../common/llm/index.ts";
import type { FoundCharacter } from "./character-selection.ts";

/** A persona shorter than this is a refusal or an empty answer, not a persona. */
export const MIN_PERSONA_CHARS = 40;

/** Pass 1: the character's profile (JSON, temperature 0.3), validated; InvalidLlmOutputError when it is not one. */
export async function extractProfile(llm: LanguageModel, book: BookInfo, character: FoundCharacter, signal?: AbortSignal): Promise<CharacterProfile> {
  const messages = buildExtractionMessages({
    book,
    character: {
      name: character.name,
      aliases: character.aliases,
      gender: character.gender,
      quotes: character.quotes,
      mentionCount: character.mentionCount,
      quoteCount: character.quoteCount,
    },
    cooccurring: character.cooccurring,
    passages: character.passages,
  });
  const answer = await llm.complete(messages, { purpose: "extract", temperature: EXTRACTION_TEMPERATURE, json: true, ...(signal ? { signal } : {}) });
  return parseProfile(answer);
}

/** Pass 2: the first-person persona prompt (plain text, temperature 0.7). */
export async function writePersona(
  llm: LanguageModel,
  book: BookInfo,
  character: FoundCharacter,
  profile: CharacterProfile,
  signal?: AbortSignal,
): Promise<string> {
  const messages = buildPersonaMessages({ book, name: character.name, profile, quotes: character.quotes });
  const answer = withoutNul(await llm.complete(messages, { purpose: "persona", temperature: PERSONA_TEMPERATURE, ...(signal ? { signal } : {}) })).trim();
  if (answer.length < MIN_PERSONA_CHARS) throw new InvalidLlmOutputError(`persona for ${character.name} is ${answer.length} characters long`);
  return answer;
}
