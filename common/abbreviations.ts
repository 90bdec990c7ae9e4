/**
 * A full stop that ends a title or an initial, not a sentence: "Mr. Darcy", "J. Smith",
 * "altogether—Mr. Bingley". The chunker cuts at sentence ends with it and the offline model splits
 * the book's lines into sentences with it, so both read a line the same way. Pure.
 */
const ABBREVIATION_BEFORE_DOT = /(?:^|[\s("'“‘\p{Pd}])(?:Mr|Mrs|Ms|Dr|St|Prof|Sr|Jr|Mme|Mlle|Messrs|\p{Lu})\.$/u;

/** Whether `text` ends on such a full stop. */
export function endsInAbbreviation(text: string): boolean {
  return ABBREVIATION_BEFORE_DOT.test(text);
}
