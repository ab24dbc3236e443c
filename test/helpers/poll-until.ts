/** Thrown by a check that knows waiting longer cannot help (the server it waits for has exited). */
export class GiveUp extends Error {}

/**
 * Polls a check until it returns a value (not undefined or false); on time-out, says what was last
 * seen. A check that throws GiveUp ends the wait at once with that error.
 */
export async function pollUntil<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs: number,
  everyMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      if (error instanceof GiveUp) throw error;
      last = error;
    }
    if (Date.now() > deadline)
      throw new Error(
        `${what}: not true after ${timeoutMs} ms${last ? ` (${last instanceof Error ? last.message : String(last)})` : ''}`,
      );
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
