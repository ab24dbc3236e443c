/**
 * Waiting on an autoscaler's passes, on either platform: the positive signal that it had the chance
 * to act on the load as it is now.
 */

/** Resolves after the autoscaler has made `times` more passes (its own timer's or anyone's). */
export async function afterTicks(
  autoscaler: { tick(now?: number): Promise<void> },
  times: number,
): Promise<void> {
  const tick = autoscaler.tick.bind(autoscaler);
  let seen = 0;
  try {
    await new Promise<void>((resolve) => {
      autoscaler.tick = async (now?: number) => {
        await tick(now);
        if (++seen >= times) resolve();
      };
    });
  } finally {
    Reflect.deleteProperty(autoscaler, 'tick');
  }
}
