// A handler receives the request as an event and returns a value or {statusCode, headers, body}.
export async function handle(event, context) {
  const name = event.query?.name ?? event.body?.name ?? 'world';
  return {
    message: `${process.env.GREETING ?? 'Hello'}, ${name}!`,
    function: context.functionName,
    path: event.path,
  };
}
