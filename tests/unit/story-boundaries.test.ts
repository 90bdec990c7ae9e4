import { describe, expect, test } from "bun:test";
import { numberOf, storyBoundaries, storyHeading } from "../../ingest/book/story-boundaries.ts";

// Every heading here is written for these tests.

describe("story headings", () => {
  test.each([
    ["I. A SCANDAL AT THE MILL", 1],
    ["II. The Red Lantern", 2],
    ["ADVENTURE III. THE BLUE DOOR", 3],
    ["Adventure IV.", 4],
    ["Story 5: The Last Letter", 5],
    ["TALE TWELVE", 12],
    ["IX. THE ADVENTURE OF THE SEXTON’S THUMB", 9],
  ])("%p opens story %p", (heading, n) => {
    expect(storyHeading(heading)).toBe(n);
  });

  test.each([
    ["CHAPTER I."],
    ["Chapter 1"],
    ["BOOK ONE: 1805"],
    ["I."],
    ["III."],
    ["1. he went home and slept until the morning came"],
    ["I. A tale that runs on far too long to be any kind of heading at all, as prose does"],
    ["Down the Rabbit Hole"],
  ])("%p is not a story heading", (heading) => {
    expect(storyHeading(heading)).toBeUndefined();
  });

  test.each([
    ["iv", 4],
    ["XII", 12],
    ["xl", 40],
    ["7", 7],
    ["three", 3],
    ["Bohemia", undefined],
  ])("%p is the number %p", (word, n) => {
    expect(numberOf(word)).toBe(n);
  });
});

describe("story boundaries", () => {
  const prose = (n: number) => Array.from({ length: n }, (_, k) => `Paragraph ${k} of the story, with words in it that run on as prose does.`);

  test("a collection's stories begin at their numbered headings, after a table of contents", () => {
    const paragraphs = [
      "Contents",
      "I. The Mill",
      "II. The Lantern",
      "III. The Door",
      "I. THE MILL",
      ...prose(6),
      "II. THE LANTERN",
      "I.",
      ...prose(6),
      "III. THE DOOR",
      ...prose(6),
    ];
    expect(storyBoundaries(paragraphs)).toEqual([4, 11, 19]);
  });

  test("a novel's chapters, or fewer than three stories, are not a collection", () => {
    expect(storyBoundaries(["CHAPTER I.", ...prose(6), "CHAPTER II.", ...prose(6), "CHAPTER III.", ...prose(6)])).toEqual([]);
    expect(storyBoundaries(["I. THE MILL", ...prose(6), "II. THE LANTERN", ...prose(6)])).toEqual([]);
  });

  test("headings out of sequence are not a collection", () => {
    expect(storyBoundaries(["I. THE MILL", ...prose(6), "III. THE LANTERN", ...prose(6), "VII. THE DOOR", ...prose(6)])).toEqual([]);
  });
});
