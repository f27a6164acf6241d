/**
 * Group commit: one statement at a time, and the calls made while it runs go together in the next.
 * A lone call runs at once (no added wait); under concurrency one round trip serves many calls.
 * `run` gets the inputs in order and answers each, in order.
 */
export function coalesced<I, O>(run: (inputs: I[]) => Promise<O[]>): (input: I) => Promise<O> {
  let waiting: { input: I; resolve: (output: O) => void; reject: (error: unknown) => void }[] = [];
  let running = false;
  const flush = async () => {
    running = true;
    const batch = waiting;
    waiting = [];
    try {
      const outputs = await run(batch.map((w) => w.input));
      for (const [i, w] of batch.entries()) w.resolve(outputs[i]!);
    } catch (error) {
      for (const w of batch) w.reject(error);
    } finally {
      running = false;
      if (waiting.length > 0) void flush();
    }
  };
  return (input) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ input, resolve, reject });
      if (!running) void flush();
    });
}
