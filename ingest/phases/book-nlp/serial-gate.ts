/**
 * A gate that lets one task through at a time, in the order they arrived. The book NLP step runs
 * behind one per process (SPEC: one ingestion job in the NLP toolkit at a time, a single shared
 * instance), however many jobs the worker runs side by side.
 */
export interface SerialGate {
  run<T>(task: () => Promise<T>): Promise<T>;
}

export function createSerialGate(): SerialGate {
  let last: Promise<void> = Promise.resolve();
  return {
    async run(task) {
      const previous = last;
      let release!: () => void;
      last = new Promise<void>((resolve) => (release = resolve));
      await previous;
      try {
        return await task();
      } finally {
        release();
      }
    },
  };
}
