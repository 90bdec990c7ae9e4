/**
 * Stored text as it may be quoted in a prompt. Book text and conversation text are quoted, never
 * obeyed: passages are fenced between markers that no stored text can produce, and no stored line
 * may pass for one of our headings or labels. Pure: no I/O.
 */
import {
  PASSAGE_CLOSE,
  PASSAGE_OPEN,
  PASSAGES_HEADING,
  PREFERENCES_HEADING,
  READING_POSITION_HEADING,
  REWRITE_HISTORY_LABEL,
  REWRITE_MESSAGE_LABEL,
  SUMMARY_HEADING,
  SUMMARY_MESSAGES_LABEL,
  SUMMARY_PREVIOUS_LABEL,
} from "../llm/prompt-format.ts";
import { ANGLE_BRACKETS, spelledKey } from "../text-normalise.ts";

/**
 * A run of two or more characters that read as angle brackets is what a fence marker is made of, so
 * in stored text such a run is taken out (replaced by a space), invisible characters and marks between
 * them (which draw nothing) included. A single one is left, as in "«oui»".
 */
const ANGLE_RUN = new RegExp(`[${ANGLE_BRACKETS}](?:[\\p{Default_Ignorable_Code_Point}\\p{M}]*[${ANGLE_BRACKETS}])+`, "gu");
/** Every character a model may take for the end of a line. */
const LINE_END = /(\r\n|[\n\r\v\f\u0085\u2028\u2029])/;

/** Longer than our longest marker or heading, spelled: such a line cannot be one. */
const MAX_RESERVED_LETTERS = 40;

/**
 * Our markers, headings and labels as they are spelled (common/text-normalise.ts: compatibility
 * forms, invisible characters, accents, case and look-alike letters folded, punctuation and spacing
 * dropped): a stored line that spells one of them is left out.
 */
const RESERVED_LINES = new Set(
  [
    PASSAGE_OPEN,
    PASSAGE_CLOSE,
    PREFERENCES_HEADING,
    PASSAGES_HEADING,
    SUMMARY_HEADING,
    READING_POSITION_HEADING,
    REWRITE_HISTORY_LABEL,
    REWRITE_MESSAGE_LABEL,
    SUMMARY_PREVIOUS_LABEL,
    SUMMARY_MESSAGES_LABEL,
  ].map(spelledKey),
);

/**
 * Stored text as it may appear in a prompt: it can neither close nor open a passage fence, nor start
 * the preference block or any other section of ours. Runs of angle brackets (look-alikes included)
 * become a space, and a line that spells one of our markers or headings (in any case, spacing,
 * compatibility form, look-alike letters, with accents or invisible characters) is left out.
 * Everything else is kept as written.
 */
export function neutraliseFences(text: string): string {
  const unbracketed = text.replace(ANGLE_RUN, " ");
  const parts = unbracketed.split(LINE_END);
  if (!parts.some((line, i) => i % 2 === 0 && isReservedLine(line))) return unbracketed;
  // parts alternates line, line end, line…: a reserved line goes with the line end after it.
  let out = "";
  for (let i = 0; i < parts.length; i += 2) if (!isReservedLine(parts[i]!)) out += parts[i]! + (parts[i + 1] ?? "");
  return out;
}

/** More Latin letters than any marker spells (folding never removes one): most lines of prose, ruled out without folding. */
const MANY_LETTERS = new RegExp(`^(?:[^A-Za-z]*[A-Za-z]){${MAX_RESERVED_LETTERS + 1}}`);

function isReservedLine(line: string): boolean {
  if (line.length > MAX_RESERVED_LETTERS && MANY_LETTERS.test(line)) return false;
  return RESERVED_LINES.has(spelledKey(line));
}
