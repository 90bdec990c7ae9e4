/**
 * The reader's preferences for one character (SPEC: user_preferences), compiled into the lines of
 * the `USER PREFERENCE MODIFIERS` block of the chat prompt. Pure: no I/O.
 *
 * Each allowed value becomes a short instruction the model can follow. A value the spec does not
 * list (a newer frontend, a hand-edited row) is left out, never a failure: `skippedPreferenceValues`
 * names them so the caller can warn. `preference_summary` is the reader's own words and overrides
 * the rest; the block says so.
 */

/** A reader's saved preferences for one character, as read from user_preferences. */
export interface PreferencesRow {
  relationshipMode: string;
  customRelationship?: string | null;
  speechModifiers: readonly unknown[];
  behavioralModifiers: readonly unknown[];
  preferenceSummary: string | null;
}

export const RELATIONSHIP_MODES = {
  stranger: "a stranger to you: be courteous and a little guarded, assume no familiarity",
  friend: "your friend: be at ease, open and warm with them",
  sibling: "your brother or sister: be familiar, teasing and loyal",
  parent: "your parent: speak to them as you would to your mother or father",
  child: "your child: speak to them as a caring parent would",
  partner: "your partner: be affectionate and close",
  custom: "",
} as const satisfies Record<string, string>;

export const SPEECH_MODIFIERS = {
  talk_less: "talk less: keep replies short",
  no_analogies: "no analogies: say things plainly, without comparisons or metaphors",
  use_simple_words: "use simple words: everyday vocabulary and short sentences",
  be_formal: "be formal: formal address and complete sentences",
  be_informal: "be informal: casual and relaxed",
} as const satisfies Record<string, string>;

export const BEHAVIORAL_MODIFIERS = {
  be_funny: "be funny: bring humour and wit",
  be_serious: "be serious: earnest, without jokes",
  be_flirty: "be flirty: playful and charming",
  be_protective: "be protective: look out for the reader",
  be_warm: "be warm: kind and affectionate",
  be_cold: "be cold: distant and reserved",
} as const satisfies Record<string, string>;

export const SUMMARY_OVERRIDES = "this is in the reader's own words and overrides the lines above wherever they differ";

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

function known<T extends Record<string, string>>(table: T, value: unknown): value is keyof T & string {
  return typeof value === "string" && Object.hasOwn(table, value);
}

/** Cuts a free-text field (the reader's own words, of any length in the row) to what the prompt allows. */
export type FitFreeText = (text: string) => string;

function relationshipLine({ relationshipMode, customRelationship }: PreferencesRow, fit: FitFreeText): string | null {
  if (relationshipMode === "custom") {
    const described = oneLine(fit(customRelationship?.trim() ?? ""));
    return described ? `Relationship mode: custom: the reader is ${described} to you` : null;
  }
  return known(RELATIONSHIP_MODES, relationshipMode) ? `Relationship mode: ${relationshipMode}: the reader is ${RELATIONSHIP_MODES[relationshipMode]}` : null;
}

function listLine<T extends Record<string, string>>(label: string, table: T, values: readonly unknown[]): string | null {
  const chosen = [...new Set(values.filter((v): v is keyof T & string => known(table, v)))];
  return chosen.length > 0 ? `${label}: ${chosen.map((v) => table[v]).join("; ")}` : null;
}

/**
 * The lines of the preference block, or "" when there is no row or nothing in it to follow. `fit`
 * cuts the two free-text fields (custom_relationship, preference_summary) before they are used.
 */
export function compilePreferences(preferences: PreferencesRow | null | undefined, fit: FitFreeText = (text) => text): string {
  if (!preferences) return "";
  const summary = oneLine(fit(preferences.preferenceSummary?.trim() ?? ""));
  return [
    relationshipLine(preferences, fit),
    listLine("Speech modifiers", SPEECH_MODIFIERS, preferences.speechModifiers),
    listLine("Behavioral modifiers", BEHAVIORAL_MODIFIERS, preferences.behavioralModifiers),
    summary ? `Preference summary: ${summary} (${SUMMARY_OVERRIDES})` : null,
  ]
    .filter((line): line is string => line !== null)
    .join("\n");
}

/** The values compilePreferences leaves out (the spec does not list them, or a custom relationship without a description), as "field=value". */
export function skippedPreferenceValues(preferences: PreferencesRow): string[] {
  const unknown: string[] = [];
  const mode = preferences.relationshipMode;
  if (!known(RELATIONSHIP_MODES, mode)) unknown.push(`relationship_mode=${String(mode)}`);
  else if (mode === "custom" && !oneLine(preferences.customRelationship ?? "")) unknown.push("custom_relationship=(empty)");
  for (const v of preferences.speechModifiers) if (!known(SPEECH_MODIFIERS, v)) unknown.push(`speech_modifiers=${String(v)}`);
  for (const v of preferences.behavioralModifiers) if (!known(BEHAVIORAL_MODIFIERS, v)) unknown.push(`behavioral_modifiers=${String(v)}`);
  return unknown;
}
