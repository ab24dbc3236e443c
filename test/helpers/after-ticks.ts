/**
 * Waiting on a periodic pass (an autoscaler's tick, a scaler's idle sweep), on either platform: the
 * positive signal that it had the chance to act on the state as it is now.
 */

type Pass = (...args: never[]) => Promise<void>;

/** Resolves after `target[method]` has finished `times` more passes (its own timer's or anyone's). */
export async function afterPasses<K extends string>(
  target: { [key in K]: Pass },
  method: K,
  times: number,
): Promise<void> {
  const pass = target[method].bind(target) as Pass;
  let seen = 0;
  try {
    await new Promise<void>((resolve) => {
      target[method] = (async (...args: never[]) => {
        await pass(...args);
        if (++seen >= times) resolve();
      }) as (typeof target)[K];
    });
  } finally {
    Reflect.deleteProperty(target, method);
  }
}

/** Resolves after the autoscaler has made `times` more passes. */
export function afterTicks(autoscaler: { tick(now?: number): Promise<void> }, times: number): Promise<void> {
  return afterPasses(autoscaler, 'tick', times);
}
