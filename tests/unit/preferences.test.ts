import { describe, expect, test } from "bun:test";
import {
  BEHAVIORAL_MODIFIERS,
  compilePreferences,
  RELATIONSHIP_MODES,
  skippedPreferenceValues,
  SPEECH_MODIFIERS,
  SUMMARY_OVERRIDES,
  type PreferencesRow,
} from "../../common/prompt/preferences.ts";
import { buildChatSystemPrompt } from "../../common/prompt/chat.ts";
import { PREFERENCES_HEADING } from "../../common/llm/prompt-format.ts";

const none: PreferencesRow = { relationshipMode: "stranger", speechModifiers: [], behavioralModifiers: [], preferenceSummary: null };

describe("the USER PREFERENCE MODIFIERS block", () => {
  test("the spec's seven relationship modes, five speech and six behavioural modifiers are all understood", () => {
    expect(Object.keys(RELATIONSHIP_MODES)).toEqual(["stranger", "friend", "sibling", "parent", "child", "partner", "custom"]);
    expect(Object.keys(SPEECH_MODIFIERS)).toEqual(["talk_less", "no_analogies", "use_simple_words", "be_formal", "be_informal"]);
    expect(Object.keys(BEHAVIORAL_MODIFIERS)).toEqual(["be_funny", "be_serious", "be_flirty", "be_protective", "be_warm", "be_cold"]);
  });

  interface Case {
    name: string;
    row: PreferencesRow | null;
    lines: string[];
    skipped: string[];
  }
  test.each<Case>([
    { name: "no row", row: null, lines: [], skipped: [] },
    { name: "a stranger with nothing else", row: none, lines: ["Relationship mode: stranger: the reader is a stranger to you"], skipped: [] },
    ...(["friend", "sibling", "parent", "child", "partner"] as const).map((mode) => ({
      name: `the ${mode} mode`,
      row: { ...none, relationshipMode: mode },
      lines: [`Relationship mode: ${mode}: the reader is ${RELATIONSHIP_MODES[mode]}`],
      skipped: [],
    })),
    {
      name: "a custom relationship, described in the reader's words",
      row: { ...none, relationshipMode: "custom", customRelationship: "  my fencing\nmaster " },
      lines: ["Relationship mode: custom: the reader is my fencing master to you"],
      skipped: [],
    },
    {
      name: "a custom relationship nobody described",
      row: { ...none, relationshipMode: "custom", customRelationship: " " },
      lines: [],
      skipped: ["custom_relationship=(empty)"],
    },
    {
      name: "a custom text with another mode (ignored: it is used only with custom)",
      row: { ...none, relationshipMode: "friend", customRelationship: "my rival" },
      lines: ["Relationship mode: friend:"],
      skipped: [],
    },
    {
      name: "every speech and behavioural modifier",
      row: { ...none, speechModifiers: Object.keys(SPEECH_MODIFIERS), behavioralModifiers: Object.keys(BEHAVIORAL_MODIFIERS) },
      lines: [
        "Relationship mode: stranger:",
        `Speech modifiers: ${Object.values(SPEECH_MODIFIERS).join("; ")}`,
        `Behavioral modifiers: ${Object.values(BEHAVIORAL_MODIFIERS).join("; ")}`,
      ],
      skipped: [],
    },
    {
      name: "unknown values, a repeated one and a non-string (skipped, the rest kept)",
      row: { ...none, relationshipMode: "nemesis", speechModifiers: ["shout", "talk_less", "talk_less", 7], behavioralModifiers: ["be_sly"] },
      lines: ["Speech modifiers: talk less: keep replies short"],
      skipped: ["relationship_mode=nemesis", "speech_modifiers=shout", "speech_modifiers=7", "behavioral_modifiers=be_sly"],
    },
    {
      name: "a preference summary, which overrides the rest",
      row: { ...none, relationshipMode: "partner", behavioralModifiers: ["be_cold"], preferenceSummary: "Actually, be\nwarm with me." },
      lines: ["Relationship mode: partner:", "Behavioral modifiers: be cold: distant and reserved", `Preference summary: Actually, be warm with me. (${SUMMARY_OVERRIDES})`],
      skipped: [],
    },
  ])("$name", ({ row, lines, skipped }) => {
    const compiled = compilePreferences(row);
    const got = compiled === "" ? [] : compiled.split("\n");
    expect(got).toHaveLength(lines.length);
    lines.forEach((line, i) => expect(got[i]!.startsWith(line)).toBe(true));
    if (row) expect(skippedPreferenceValues(row)).toEqual(skipped);
  });

  test("the block in the system message is headed USER PREFERENCE MODIFIERS, its lines in the spec's order", () => {
    const prompt = buildChatSystemPrompt({
      personaPrompt: "I am Emma.",
      preferences: { relationshipMode: "sibling", speechModifiers: ["be_informal"], behavioralModifiers: ["be_funny"], preferenceSummary: "Tease me." },
      passages: [],
    });
    const block = prompt.slice(prompt.indexOf(PREFERENCES_HEADING));
    expect(PREFERENCES_HEADING).toContain("USER PREFERENCE MODIFIERS");
    const order = ["Relationship mode:", "Speech modifiers:", "Behavioral modifiers:", "Preference summary:"].map((l) => block.indexOf(l));
    expect(order.every((at, i) => at > 0 && (i === 0 || at > order[i - 1]!))).toBe(true);
  });
});
