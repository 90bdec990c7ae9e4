import type { Attribution } from "./attribution.ts";
import type { Character } from "./character.ts";
import type { EntityMention } from "./coref.ts";
import type { NameMention, PlaceMention } from "./names.ts";
import type { NestedQuote } from "./nested-quotes.ts";
import type { QuoteScan } from "./quotes.ts";
import type { Tokenized } from "./tokenizer.ts";

/** What the engine finds in a book; its own module so the engine and the file writer share it without importing each other. */
export interface Analysis {
  text: string;
  tok: Tokenized;
  scan: QuoteScan;
  names: NameMention[];
  places: PlaceMention[];
  /** chars[NARRATOR_ID] is the narrator slot; it is a person only in first-person books. */
  chars: Character[];
  narrator: boolean;
  attribution: Attribution;
  /** Tagged quotations inside quotations, written to `.quotes` beside the others. */
  nested: NestedQuote[];
  mentions: EntityMention[];
}
