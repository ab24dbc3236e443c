/**
 * Two settings of the local config: SLESS_OUTBOUND_DNS (addresses only, errors naming the setting) and
 * the proxy thread (on by default, off by env, the flag winning, other values refused naming the flag).
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadLocalConfig, loadTenancy } from './config.js';

describe('tenancy settings', () => {
  it('SLESS_OUTBOUND_DNS names the servers that resolve tenant hosts; empty means the system resolver', () => {
    expect(loadTenancy({}).outboundDns).toEqual([]);
    expect(loadTenancy({ SLESS_OUTBOUND_DNS: ' 1.1.1.1, [2606:4700::1111]:53 ,' }).outboundDns).toEqual([
      '1.1.1.1',
      '[2606:4700::1111]:53',
    ]);
  });

  it('refuses a name server that is not an address, naming the setting', () => {
    expect(() => loadTenancy({ SLESS_OUTBOUND_DNS: 'dns.example' })).toThrow(ConfigError);
    expect(() => loadTenancy({ SLESS_OUTBOUND_DNS: '1.1.1.1,dns.example' })).toThrow(
      'SLESS_OUTBOUND_DNS: Invalid IP address: dns.example (use 1.1.1.1, 1.1.1.1:53 or [::1]:53)',
    );
  });
});

describe('the proxy thread setting', () => {
  it('is on unless --proxy-thread or SLESS_PROXY_THREAD says off; the flag wins', () => {
    expect(loadLocalConfig({}, {}).proxyThread).toBe(true);
    expect(loadLocalConfig({}, { SLESS_PROXY_THREAD: 'off' }).proxyThread).toBe(false);
    expect(loadLocalConfig({ 'proxy-thread': 'on' }, { SLESS_PROXY_THREAD: 'off' }).proxyThread).toBe(true);
  });

  it('refuses another value, naming the flag', () => {
    expect(() => loadLocalConfig({ 'proxy-thread': 'yes' }, {})).toThrow(
      '--proxy-thread: "yes" must be on or off',
    );
  });
});
