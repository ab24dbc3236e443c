/**
 * Runtime facts: the end-of-life warning appears only past the date and names the supported lines, and
 * every runtime pins its base image by version and has a server directory of its own language.
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
      'runtime go1.21 is past its end of life (2024-08-13): it still builds and runs, but gets no upstream fixes; move to go1.25',
    );
    // No Go line here is supported any more by then: nothing to move to is named.
    expect(endOfLifeWarning('go1.21', '2026-12-02')).toBe(
      'runtime go1.21 is past its end of life (2024-08-13): it still builds and runs, but gets no upstream fixes',
    );
    expect(endOfLifeWarning('python3.13', '2026-12-02')).toBeUndefined();
    expect(endOfLifeWarning('python3.11', '2027-11-01')).toMatch(/move to python3\.12 or python3\.13$/);
  });

  it('pins every base image by version and gives every runtime a server directory of its language', () => {
    for (const name of RUNTIMES) {
      const info = RUNTIME_INFO[name];
      expect(info.name).toBe(name);
      expect(info.baseImage).toMatch(/^(node|python|golang):\d+\.\d+\.\d+-[a-z-]+$/);
      expect(info.baseImage).toContain(info.toolchain);
      expect(RUNTIME_INFO[info.serverDir as keyof typeof RUNTIME_INFO].family).toBe(info.family);
    }
  });
});
