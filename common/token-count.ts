import { countTokens } from "gpt-tokenizer/encoding/o200k_base";

/**
 * The o200k_base token count every budget is kept in: the chunker's chunks, the prompt's budgets, the
 * offline model's replies. Pure: gpt-tokenizer only.
 */

/**
 * Book text is data: `<|endoftext|>` and friends are counted as the ordinary characters they are
 * (gpt-tokenizer throws on them by default). The set is never mutated.
 */
const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

/** o200k_base token count of text, treating special-token strings as plain text. */
export function countO200kTokens(text: string): number {
  return countTokens(text, PLAIN_TEXT);
}
