import type { LookupAddress } from 'node:dns';
import { describe, expect, test } from 'vitest';
import { OutboundPolicy, OutboundRefusedError } from './outbound.js';

const lookup = (policy: OutboundPolicy, host: string, all: boolean) =>
  new Promise<string | LookupAddress[]>((resolve, reject) =>
    policy.lookup(host, { all }, (error, address) => (error ? reject(error) : resolve(address))),
  );

describe('OutboundPolicy', () => {
  test('refuses loopback, private, link-local, metadata and mapped forms; allows public', () => {
    const policy = new OutboundPolicy();
    const refused = {
      '127.0.0.1': 'a loopback',
      '127.8.9.10': 'a loopback',
      '::1': 'a loopback',
      '::ffff:127.0.0.1': 'a loopback',
      '10.0.0.1': 'a private',
      '172.31.255.255': 'a private',
      '192.168.1.1': 'a private',
      '100.64.0.1': 'a shared (carrier NAT)',
      '169.254.169.254': 'a link-local or metadata',
      'fd00:ec2::254': 'a private or metadata',
      'fe80::1': 'a link-local',
      '0.0.0.0': 'an unspecified',
      '64:ff9b::7f00:1': 'a NAT64',
    };
    for (const [address, what] of Object.entries(refused))
      expect(policy.refusal(address), address).toBe(`${what} address`);
    for (const address of ['1.1.1.1', '140.82.112.3', '2606:4700::1111', '172.32.0.1'])
      expect(policy.refusal(address), address).toBeUndefined();
  });

  test('an admin allowance opens exactly its range', () => {
    const policy = new OutboundPolicy(['127.0.0.1/32', 'fd00::/8']);
    expect(policy.refusal('127.0.0.1')).toBeUndefined();
    expect(policy.refusal('127.0.0.2')).toBe('a loopback address');
    expect(policy.refusal('fd12::1')).toBeUndefined();
    expect(policy.refusal('10.0.0.1')).toBe('a private address');
    expect(() => new OutboundPolicy(['not-a-range'])).toThrow('is not an IP address or CIDR range');
  });

  test('names are checked after resolution, in both lookup forms; literals without one', async () => {
    const policy = new OutboundPolicy();
    await expect(lookup(policy, 'localhost', true)).rejects.toThrow(OutboundRefusedError);
    await expect(lookup(policy, 'localhost', false)).rejects.toThrow('localhost is a loopback address');
    expect(() => policy.checkHost('[::1]')).toThrow('[::1] is a loopback address');
    expect(() => policy.checkHost('169.254.169.254')).toThrow('link-local or metadata');
    expect(() => policy.checkHost('example.com')).not.toThrow();
    const open = new OutboundPolicy(['127.0.0.0/8', '::1/128']);
    const answer = await lookup(open, 'localhost', false);
    expect(['127.0.0.1', '::1']).toContain(answer);
  });
});
