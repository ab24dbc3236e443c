/** A closed-loop load: `clients` senders, each sending the next of `count` requests once its last ended. */
export async function closedLoop(
  clients: number,
  count: number,
  send: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < count) await send(next++);
    }),
  );
}
