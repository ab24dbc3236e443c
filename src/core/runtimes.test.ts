/**
 * Runtime facts: the end-of-life warning appears only past the date and names the supported lines,
 * the Go lines' pins and dates, and every runtime pins its base image by version (the release its
 * version names) and has a server directory of its own language.
 */
import { describe, expect, it } from 'vitest';
import { endOfLifeWarning, RUNTIME_INFO } from './runtimes.js';
import { RUNTIMES } from './schemas.js';

describe('runtimes', () => {
  it('warns for a runtime past its end of life only, and names the supported lines of its language', () => {
    expect(endOfLifeWarning('nodejs20', '2026-04-30')).toBeUndefined();
    expect(endOfLifeWarning('nodejs20', '2026-05-01')).toBe(
      'runtime nodejs20 is past its end of life (2026-04-30): it still builds and runs, but gets no upstream fixes; move to nodejs22 or nodejs24',
    );
    expect(endOfLifeWarning('go1.21', '2025-01-01')).toBe(
      'runtime go1.21 is past its end of life (2024-08-13): it still builds and runs, but gets no upstream fixes; move to go1.25 or go1.26 or go1.27',
    );
    // Go fixes its two newest lines: since Go 1.27, those are 1.26 and 1.27.
    expect(endOfLifeWarning('go1.21', '2026-12-03')).toBe(
      'runtime go1.21 is past its end of life (2024-08-13): it still builds and runs, but gets no upstream fixes; move to go1.26 or go1.27',
    );
    expect(endOfLifeWarning('go1.25', '2026-12-03')).toBe(
      'runtime go1.25 is past its end of life (2026-08-31): it still builds and runs, but gets no upstream fixes; move to go1.26 or go1.27',
    );
    expect(endOfLifeWarning('go1.26', '2026-12-03')).toBeUndefined();
    expect(endOfLifeWarning('go1.27', '2026-12-03')).toBeUndefined();
    // Go 1.28 (February 2027) ends 1.26, Go 1.29 (August 2027) ends 1.27.
    expect(endOfLifeWarning('go1.26', '2027-02-28')).toBeUndefined();
    expect(endOfLifeWarning('go1.26', '2027-03-01')).toBe(
      'runtime go1.26 is past its end of life (2027-02-28): it still builds and runs, but gets no upstream fixes; move to go1.27',
    );
    expect(endOfLifeWarning('go1.27', '2027-08-31')).toBeUndefined();
    // No Go line here is supported any more by then: nothing to move to is named.
    expect(endOfLifeWarning('go1.21', '2027-09-01')).toBe(
      'runtime go1.21 is past its end of life (2024-08-13): it still builds and runs, but gets no upstream fixes',
    );
    expect(endOfLifeWarning('python3.13', '2026-12-02')).toBeUndefined();
    expect(endOfLifeWarning('python3.11', '2027-11-01')).toMatch(/move to python3\.12 or python3\.13$/);
  });

  it('pins the Go lines to the newest patch release of each, built on Debian bookworm', () => {
    const go = RUNTIMES.filter((r) => RUNTIME_INFO[r].family === 'go').map((r) => {
      const { name, version, baseImage, toolchain, serverDir, endOfLife } = RUNTIME_INFO[r];
      return { name, version, baseImage, toolchain, serverDir, endOfLife };
    });
    expect(go).toEqual([
      {
        name: 'go1.21',
        version: '1.21.13-r1',
        baseImage: 'golang:1.21.13-bookworm',
        toolchain: '1.21',
        serverDir: 'go1.21',
        endOfLife: '2024-08-13',
      },
      {
        name: 'go1.25',
        version: '1.25.4-r1',
        baseImage: 'golang:1.25.4-bookworm',
        toolchain: '1.25',
        serverDir: 'go1.21',
        endOfLife: '2026-08-31',
      },
      {
        name: 'go1.26',
        version: '1.26.11-r1',
        baseImage: 'golang:1.26.11-bookworm',
        toolchain: '1.26',
        serverDir: 'go1.21',
        endOfLife: '2027-02-28',
      },
      {
        name: 'go1.27',
        version: '1.27.4-r1',
        baseImage: 'golang:1.27.4-bookworm',
        toolchain: '1.27',
        serverDir: 'go1.21',
        endOfLife: '2027-08-31',
      },
    ]);
  });

  it('pins every base image by version and gives every runtime a server directory of its language', () => {
    for (const name of RUNTIMES) {
      const info = RUNTIME_INFO[name];
      expect(info.name).toBe(name);
      expect(info.baseImage).toMatch(/^(node|python|golang):\d+\.\d+\.\d+-[a-z-]+$/);
      expect(info.baseImage).toContain(info.toolchain);
      // The release a local build pins (GOTOOLCHAIN) is the one the kube image carries.
      expect(info.baseImage).toContain(`:${info.version.split('-')[0]}-`);
      expect(RUNTIME_INFO[info.serverDir as keyof typeof RUNTIME_INFO].family).toBe(info.family);
    }
  });
});
