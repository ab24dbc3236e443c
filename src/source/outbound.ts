/**
 * Outbound requests made on a tenant's behalf (a GitSource URL) must not reach this machine, the
 * private network or a cloud metadata endpoint: sless would otherwise be a proxy into places only it
 * can reach. The check runs on the address actually connected to, after DNS resolution and on every
 * connection, so a name that first resolves to a public address and then to 127.0.0.1 (DNS
 * rebinding) is refused as well. An admin may allow ranges explicitly (SLESS_OUTBOUND_ALLOW).
 */
import { lookup as dnsLookup, type LookupAddress, Resolver } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { SourceError } from '../core/errors.js';

/** Ranges no tenant URL may reach, with the words the refusal uses. */
const REFUSED_RANGES: ReadonlyArray<readonly [string, number, 'ipv4' | 'ipv6', string]> = [
  ['0.0.0.0', 8, 'ipv4', 'an unspecified'],
  ['127.0.0.0', 8, 'ipv4', 'a loopback'],
  ['10.0.0.0', 8, 'ipv4', 'a private'],
  ['172.16.0.0', 12, 'ipv4', 'a private'],
  ['192.168.0.0', 16, 'ipv4', 'a private'],
  ['100.64.0.0', 10, 'ipv4', 'a shared (carrier NAT)'],
  ['169.254.0.0', 16, 'ipv4', 'a link-local or metadata'],
  ['192.0.0.0', 24, 'ipv4', 'a reserved'],
  ['198.18.0.0', 15, 'ipv4', 'a benchmarking'],
  ['224.0.0.0', 4, 'ipv4', 'a multicast'],
  ['240.0.0.0', 4, 'ipv4', 'a reserved'],
  ['::', 128, 'ipv6', 'an unspecified'],
  ['::1', 128, 'ipv6', 'a loopback'],
  ['fc00::', 7, 'ipv6', 'a private or metadata'],
  ['fe80::', 10, 'ipv6', 'a link-local'],
  ['ff00::', 8, 'ipv6', 'a multicast'],
  // NAT64 can wrap any IPv4 address, the private ones included.
  ['64:ff9b::', 96, 'ipv6', 'a NAT64'],
];

export class OutboundRefusedError extends SourceError {
  readonly code = 'EOUTBOUNDREFUSED';
  constructor(message: string) {
    super(message, 'OutboundRefused');
  }
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

export class OutboundPolicy {
  private readonly refused: Array<{ list: BlockList; what: string }>;
  private readonly allowed = new BlockList();
  /** The allowed ranges as configured, for the start-up log. */
  readonly allowedRanges: readonly string[];

  private readonly resolver: Resolver | undefined;

  /**
   * `allow`: CIDRs or single addresses an admin lets tenant URLs reach (e.g. `127.0.0.1/32`).
   * `dnsServers`: the name servers that resolve tenant hosts (`1.1.1.1`, `[2606:4700::1111]:53`,
   * SLESS_OUTBOUND_DNS) instead of the system's resolver, so tenants see public DNS only and not the
   * names the host's own resolver knows (search domains, split-horizon zones, /etc/hosts).
   */
  constructor(allow: readonly string[] = [], dnsServers: readonly string[] = []) {
    if (dnsServers.length > 0) {
      this.resolver = new Resolver();
      this.resolver.setServers([...dnsServers]);
    }
    this.refused = REFUSED_RANGES.map(([network, prefix, family, what]) => {
      const list = new BlockList();
      list.addSubnet(network, prefix, family);
      return { list, what };
    });
    for (const range of allow) addRange(this.allowed, range);
    this.allowedRanges = Object.freeze([...allow]);
  }

  /** Why this address may not be reached, or undefined when it may. */
  refusal(address: string): string | undefined {
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (this.allowed.check(address, family)) return undefined;
    const hit = this.refused.find((r) => r.list.check(address, family));
    return hit ? `${hit.what} address` : undefined;
  }

  /** Throws when a URL's host is an address literal that may not be reached (no lookup happens). */
  checkHost(hostname: string): void {
    const bare = hostname.replace(/^\[|\]$/g, '');
    if (isIP(bare) === 0) return;
    const why = this.refusal(bare);
    if (why) throw refusedError(hostname, why);
  }

  /**
   * A `lookup` for net.connect: resolves, then refuses when any answer is off limits (a mixed
   * answer could be raced into the private address), before a socket is opened.
   */
  readonly lookup = (
    hostname: string,
    options: { all?: boolean; family?: number | string },
    callback: LookupCallback,
  ): void => {
    const family = options.family ? Number(options.family) : 0;
    const resolve = (done: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) =>
      this.resolver
        ? resolveWith(this.resolver, hostname, family, done)
        : dnsLookup(hostname, { all: true, ...(family ? { family } : {}) }, done);
    resolve((error, addresses) => {
      if (error) return callback(error, []);
      for (const { address } of addresses) {
        const why = this.refusal(address);
        if (why) return callback(refusedError(hostname, why), []);
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first)
        return callback(Object.assign(new Error(`${hostname}: no address`), { code: 'ENOTFOUND' }), []);
      callback(null, first.address, first.family);
    });
  };
}

/** A and AAAA records from the configured name servers, shaped as dns.lookup's `all` answer. */
function resolveWith(
  resolver: Resolver,
  hostname: string,
  family: number,
  done: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
): void {
  const ask = (version: 4 | 6) =>
    new Promise<LookupAddress[]>((resolve, reject) => {
      const answer = (error: NodeJS.ErrnoException | null, list: string[]) =>
        error ? reject(error) : resolve(list.map((address) => ({ address, family: version })));
      if (version === 4) resolver.resolve4(hostname, answer);
      else resolver.resolve6(hostname, answer);
    });
  const versions: Array<4 | 6> = family === 4 ? [4] : family === 6 ? [6] : [4, 6];
  void Promise.allSettled(versions.map(ask)).then((results) => {
    const addresses = results.flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
    const failure = results.find((r) => r.status === 'rejected');
    if (addresses.length === 0 && failure?.status === 'rejected') return done(failure.reason, []);
    done(null, addresses);
  });
}

function refusedError(host: string, why: string): OutboundRefusedError {
  return new OutboundRefusedError(
    `${host} is ${why}; sources may not reach loopback, private, link-local or metadata addresses unless an admin allows the range (SLESS_OUTBOUND_ALLOW)`,
  );
}

/** Parses `a.b.c.d`, `a.b.c.d/n`, `::1` or `fd00::/8` into the list; throws on anything else. */
export function addRange(list: BlockList, range: string): void {
  const [address = '', prefixText] = range.trim().split('/');
  const version = isIP(address);
  if (version === 0) throw new Error(`"${range}" is not an IP address or CIDR range`);
  const family = version === 6 ? 'ipv6' : 'ipv4';
  const max = version === 6 ? 128 : 32;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max)
    throw new Error(`"${range}": the prefix length must be 0..${max}`);
  list.addSubnet(address, prefix, family);
}
