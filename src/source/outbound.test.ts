/**
 * OutboundPolicy, which keeps tenant-driven fetches off internal networks: loopback, private, link-local,
 * metadata, NAT64 and mapped addresses refused up to the edges of each range, admin allowances opening
 * exactly their range, and names checked after resolution, including against a real local DNS server
 * answering a public and a loopback address in either order.
 */
import type { LookupAddress } from 'node:dns';
import dns2 from 'dns2';
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

  test('every refused range ends where it should: the last address of each is refused, the next one is not', () => {
    const policy = new OutboundPolicy();
    const edges = {
      '127.255.255.255': 'a loopback',
      '10.255.255.255': 'a private',
      '172.16.0.0': 'a private',
      '192.168.255.255': 'a private',
      '100.127.255.255': 'a shared (carrier NAT)',
      '169.254.255.255': 'a link-local or metadata',
      '0.255.255.255': 'an unspecified',
      'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff': 'a private or metadata',
      'febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff': 'a link-local',
      '::ffff:10.255.255.255': 'a private',
      '::ffff:169.254.169.254': 'a link-local or metadata',
    };
    for (const [address, what] of Object.entries(edges))
      expect(policy.refusal(address), address).toBe(`${what} address`);
    for (const address of [
      '128.0.0.0',
      '11.0.0.0',
      '172.15.255.255',
      '192.169.0.0',
      '100.128.0.0',
      '1.0.0.0',
    ])
      expect(policy.refusal(address), address).toBeUndefined();
  });

  test('a name with a public and a loopback answer is refused, whichever order they come in', async () => {
    const orders = [
      ['1.1.1.1', '127.0.0.1'],
      ['127.0.0.1', '1.1.1.1'],
    ];
    let next = 0;
    const server = dns2.createUDPServer((request, send) => {
      const response = dns2.Packet.createResponseFromRequest(request);
      const [question] = request.questions;
      if (question?.name === 'mixed.test' && question.type === dns2.Packet.TYPE.A)
        for (const address of orders[next] ?? [])
          response.answers.push(dns2.Packet.createResourceFromQuestion(question, { ttl: 0, address }));
      send(response);
    });
    await server.listen(0, '127.0.0.1');
    try {
      const policy = new OutboundPolicy([], [`127.0.0.1:${server.address().port}`]);
      for (next = 0; next < orders.length; next++)
        for (const all of [true, false])
          await expect(lookup(policy, 'mixed.test', all), `${orders[next]} all=${all}`).rejects.toThrow(
            'mixed.test is a loopback address',
          );
      // The same server's public-only answer passes: the refusal above is about the loopback answer.
      orders.push(['1.1.1.1']);
      next = 2;
      expect(await lookup(policy, 'mixed.test', false)).toBe('1.1.1.1');
    } finally {
      server.close();
    }
  });
});
