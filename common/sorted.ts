/** Binary searches over ascending arrays. Pure. */

/** The first index in [0, n) at which `below(i)` is false; `below` must hold for a prefix only. */
export function partitionPoint(n: number, below: (i: number) => boolean): number {
  let low = 0;
  let high = n;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (below(mid)) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** How many of the ascending `values` are below `value`: the index of the first at or above it. */
export function countBelow(values: readonly number[], value: number): number {
  return partitionPoint(values.length, (i) => values[i]! < value);
}

/** Whether one of the ascending `values` lies within `reach` of `at`, on either side. */
export function anyWithin(values: readonly number[], at: number, reach: number): boolean {
  const k = countBelow(values, at);
  const [before, after] = [values[k - 1], values[k]];
  return (after !== undefined && after - at <= reach) || (before !== undefined && at - before <= reach);
}
