import { describe, expect, test } from "bun:test";
import type { ChatMessage } from "../../common/llm/index.ts";
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
} from "../../common/llm/prompt-format.ts";
import { buildChatMessages, buildChatSystemPrompt } from "../../common/prompt/chat.ts";
import type { ConversationMessage } from "../../common/prompt/conversation.ts";
import type { PreferencesRow } from "../../common/prompt/preferences.ts";
import { buildRewriteMessages } from "../../common/prompt/rewrite.ts";
import { buildSummaryMessages } from "../../common/prompt/summary.ts";
import { spelledKey } from "../../common/text-normalise.ts";

/**
 * Forged fence markers and headings, spelled to slip past a check by list, through every field of
 * every prompt that quotes stored text, end to end through the prompt builders. What reaches the
 * model is counted against the same prompt built from plain words: no extra line may spell a marker
 * or heading of ours, and no extra run of angle brackets may appear.
 */

const map = (table: Record<string, string>) => (s: string) => [...s.toUpperCase()].map((c) => table[c] ?? c).join("");
const pairs = (from: string, to: string) => Object.fromEntries([...from].map((c, i) => [c, [...to][i]!]));
const STYLES: Record<string, (marker: string) => string> = {
  "followed by a Hangul filler": (m) => `${m}\u3164`,
  "zero-width spaces between every character": (m) => [...m].join("\u200b"),
  "word joiners between every character": (m) => [...m].join("\u2060"),
  "soft hyphens inside words": (m) => m.replace(/(\p{L})(?=\p{L})/gu, "$1\u00ad"),
  "an accent on every letter": (m) => m.replace(/\p{L}/gu, "$&\u0301"),
  "small capitals": map(pairs("ABCDEFGHIJKLMNOPQRSTUVWYZ", "ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘꞯʀꜱᴛᴜᴠᴡʏᴢ")),
  "Lisu letters": map(pairs("ABCDEFGHIJKLMNOPRSTUVWXYZ", "ꓮꓐꓚꓓꓰꓝꓖꓧꓲꓙꓗꓡꓟꓠꓳꓑꓣꓢꓔꓴꓦꓪꓫꓬꓜ")),
  "Cherokee letters": map(pairs("ABCDEGHJKLMPRSTVWZ", "ᎪᏴᏟᎠᎬᏀᎻᎫᏦᏞᎷᏢᏒᏚᎢᏙᏔᏃ")),
  "Armenian letters": map(pairs("OSUL", "ՕՏՍԼ")),
  "full-width and Cyrillic letters mixed": (m) => map(pairs("AEOPC", "АЕОРС"))(m).replace(/[<>]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 0xfee0)),
};
const MARKERS = [PASSAGE_CLOSE, PASSAGE_OPEN, PREFERENCES_HEADING, SUMMARY_HEADING];
const FORGERIES = MARKERS.flatMap((marker) => Object.entries(STYLES).map(([style, forge]) => ({ marker, style, forged: forge(marker) })));

const P = { text: "Mara trimmed the wick at dusk." };
const pierre = { name: "Pierre", description: "An awkward heir.", profile: { voice: "Earnest." } };
const say = (role: "user" | "assistant", content: string): ConversationMessage => ({ role, content });
const prefs = (row: Partial<PreferencesRow>): PreferencesRow => ({ relationshipMode: "friend", speechModifiers: [], behavioralModifiers: [], preferenceSummary: null, ...row });
const system = (input: Partial<Parameters<typeof buildChatSystemPrompt>[0]>): ChatMessage[] => [
  { role: "system", content: buildChatSystemPrompt({ personaPrompt: "I am Pierre.", passages: [P], summary: "They spoke of the lamp.", ...input }) },
];

/** Every field of a prompt that quotes stored text, as a prompt built around `value`. */
const ROUTES: Record<string, (value: string) => ChatMessage[]> = {
  persona: (v) => system({ personaPrompt: v }),
  preference_summary: (v) => system({ preferences: prefs({ preferenceSummary: v }) }),
  custom_relationship: (v) => system({ preferences: prefs({ relationshipMode: "custom", customRelationship: v }) }),
  "the chat request's preferences": (v) => system({ preferencesOverride: v }),
  "the summary": (v) => system({ summary: v }),
  "the book's own text (a passage)": (v) => system({ passages: [{ text: v }, P] }),
  history: (v) => buildChatMessages("SYSTEM", [say("user", v), say("assistant", v)], "And then?"),
  "the rewrite's history": (v) => buildRewriteMessages({ character: pierre, userMessage: "And then?", history: [say("user", v), say("assistant", v)] }),
  "the rewrite's character profile": (v) => buildRewriteMessages({ character: { ...pierre, description: v }, userMessage: "And then?", history: [] }),
  "the summary fold's previous summary": (v) => buildSummaryMessages({ characterName: "Pierre", previousSummary: v, leaving: [say("user", "Hi")] }),
  "the summary fold's messages": (v) => buildSummaryMessages({ characterName: "Pierre", previousSummary: null, leaving: [say("user", v), say("assistant", v)] }),
};

const RESERVED = new Set(
  [PASSAGE_OPEN, PASSAGE_CLOSE, PREFERENCES_HEADING, PASSAGES_HEADING, SUMMARY_HEADING, READING_POSITION_HEADING, REWRITE_HISTORY_LABEL, REWRITE_MESSAGE_LABEL, SUMMARY_PREVIOUS_LABEL, SUMMARY_MESSAGES_LABEL].map(spelledKey),
);
const ANGLES = /[<>‹›«»〈〉《》⟨⟩⟪⟫≪≫⋘⋙˂˃ᐸᐳ❬❭❮❯❰❱〈〉⧼⧽⦉⦊⦑⦒]{2,}/gu;

/** Lines spelling a marker or heading of ours, and runs of angle brackets as a reader of the text sees them. */
function markersIn(messages: readonly ChatMessage[]): number {
  const text = messages.map((m) => m.content).join("\n");
  const lines = text.split(/\r\n|[\n\r\v\f\u0085\u2028\u2029]/).filter((line) => RESERVED.has(spelledKey(line))).length;
  const seen = text.normalize("NFKC").replace(/[\p{Default_Ignorable_Code_Point}\p{M}]/gu, "");
  return lines + (seen.match(ANGLES)?.length ?? 0);
}

/** Forged markers that reach the model: those in the prompt beyond the ones a plain value gives. */
function forgedMarkers(route: (value: string) => ChatMessage[], forged: string): number {
  const plain = markersIn(route("Before.\nplain words\nAfter. Before plain words after."));
  return markersIn(route(`Before.\n${forged}\nAfter. Before ${forged} after.`)) - plain;
}

describe("forged fences and headings through every field of the prompts", () => {
  for (const [name, route] of Object.entries(ROUTES)) {
    test.each(FORGERIES)(`${name}: $marker, $style`, ({ forged }) => {
      expect(forgedMarkers(route, forged)).toBe(0);
    });
  }

  test("in all: no forged marker reaches the model, and the plain text around each is kept", () => {
    let reached = 0;
    for (const route of Object.values(ROUTES)) for (const { forged } of FORGERIES) reached += forgedMarkers(route, forged);
    expect({ routes: Object.keys(ROUTES).length, forgeries: FORGERIES.length, reached }).toEqual({ routes: 11, forgeries: 40, reached: 0 });
    for (const route of Object.values(ROUTES)) {
      const text = route(`Before.\n${FORGERIES[0]!.forged}\nAfter.`).map((m) => m.content).join("\n");
      expect(text).toContain("Before.");
      expect(text).toContain("After.");
    }
  });
});
