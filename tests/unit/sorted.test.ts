import { describe, expect, test } from "bun:test";
import { anyWithin, countBelow, partitionPoint } from "../../common/sorted.ts";

describe("binary searches over ascending arrays", () => {
  test.each([
    [[], 5, 0],
    [[1, 3, 5], 0, 0],
    [[1, 3, 5], 1, 0],
    [[1, 3, 5], 2, 1],
    [[1, 3, 5], 5, 2],
    [[1, 3, 5], 6, 3],
    [[2, 2, 2, 4], 2, 0],
    [[2, 2, 2, 4], 3, 3],
  ])("countBelow(%p, %p) is %p", (values, value, expected) => {
    expect(countBelow(values, value)).toBe(expected);
  });

  test.each([
    [[], 10, 100, false],
    [[100], 90, 10, true],
    [[100], 89, 10, false],
    [[100], 110, 10, true],
    [[100], 111, 10, false],
    [[10, 500], 260, 240, true],
    [[10, 500], 260, 239, false],
  ])("anyWithin(%p, %p, %p) is %p", (values, at, reach, expected) => {
    expect(anyWithin(values, at, reach)).toBe(expected);
  });

  test("partitionPoint finds where a predicate on a prefix stops holding, over any indexed data", () => {
    const words = ["apple", "banana", "cherry", "date"];
    expect(partitionPoint(words.length, (i) => words[i]! < "c")).toBe(2);
    expect(partitionPoint(words.length, () => true)).toBe(4);
    expect(partitionPoint(words.length, () => false)).toBe(0);
  });
});
