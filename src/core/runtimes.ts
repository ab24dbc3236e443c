/**
 * The facts about each supported runtime that a build depends on: its version (bumped when its
 * server or base image changes), its pinned base image, and whether its entrypoint is compiled in.
 * Build keys are derived from them, so a runtime change rebuilds the functions that use it.
 */
import type { RuntimeName } from './schemas.js';

export type RuntimeFamily = 'node' | 'python' | 'go';

export interface RuntimeInfo {
  name: RuntimeName;
  /**
   * Bumped when the runtime server or its base image changes, so that build keys (and images)
   * change with it. Base images are pinned by version: `:latest` is never used.
   */
  version: string;
  baseImage: string;
  /** Compiled runtimes bake the entrypoint into the artifact, so it is part of the build key. */
  compiled: boolean;
  family: RuntimeFamily;
  /** The toolchain line a local build and run need: Node's major, Python's or Go's minor. */
  toolchain: string;
  /** The runtimes/ directory whose server (or SDK and build script) this runtime uses. */
  serverDir: string;
  /** When upstream stops fixing this line (security fixes included), as an ISO date. */
  endOfLife: string;
}

export const RUNTIME_INFO: Readonly<Record<RuntimeName, RuntimeInfo>> = {
  nodejs20: {
    name: 'nodejs20',
    version: '20.20.2-r1',
    baseImage: 'node:20.20.2-bookworm-slim',
    compiled: false,
    family: 'node',
    toolchain: '20',
    serverDir: 'nodejs20',
    endOfLife: '2026-04-30',
  },
  nodejs22: {
    name: 'nodejs22',
    version: '22.23.5-r1',
    baseImage: 'node:22.23.5-bookworm-slim',
    compiled: false,
    family: 'node',
    toolchain: '22',
    serverDir: 'nodejs20',
    endOfLife: '2027-04-30',
  },
  nodejs24: {
    name: 'nodejs24',
    version: '24.22.3-r1',
    baseImage: 'node:24.22.3-bookworm-slim',
    compiled: false,
    family: 'node',
    toolchain: '24',
    serverDir: 'nodejs20',
    endOfLife: '2028-04-30',
  },
  'python3.11': {
    name: 'python3.11',
    version: '3.11.14-r1',
    baseImage: 'python:3.11.14-slim-bookworm',
    compiled: false,
    family: 'python',
    toolchain: '3.11',
    serverDir: 'python3.11',
    endOfLife: '2027-10-31',
  },
  'python3.12': {
    name: 'python3.12',
    version: '3.12.12-r1',
    baseImage: 'python:3.12.12-slim-bookworm',
    compiled: false,
    family: 'python',
    toolchain: '3.12',
    serverDir: 'python3.11',
    endOfLife: '2028-10-31',
  },
  'python3.13': {
    name: 'python3.13',
    version: '3.13.9-r1',
    baseImage: 'python:3.13.9-slim-bookworm',
    compiled: false,
    family: 'python',
    toolchain: '3.13',
    serverDir: 'python3.11',
    endOfLife: '2029-10-31',
  },
  'go1.21': {
    name: 'go1.21',
    version: '1.21.13-r1',
    baseImage: 'golang:1.21.13-bookworm',
    compiled: true,
    family: 'go',
    toolchain: '1.21',
    serverDir: 'go1.21',
    endOfLife: '2024-08-13',
  },
  'go1.25': {
    name: 'go1.25',
    version: '1.25.4-r1',
    baseImage: 'golang:1.25.4-bookworm',
    compiled: true,
    family: 'go',
    toolchain: '1.25',
    serverDir: 'go1.21',
    // Go fixes the two newest major releases: 1.25 until Go 1.27 is out (August 2026).
    endOfLife: '2026-08-31',
  },
  // Go ships a major release each February and August and fixes the two newest, so Go 1.N is fixed
  // until Go 1.(N+2) ships, a year after its own release. Releases come early in their month and the
  // day is not known ahead; the month's last day is the date, as for go1.25.
  'go1.26': {
    name: 'go1.26',
    version: '1.26.11-r1',
    baseImage: 'golang:1.26.11-bookworm',
    compiled: true,
    family: 'go',
    toolchain: '1.26',
    serverDir: 'go1.21',
    // Released February 2026; fixed until Go 1.28 ships (February 2027).
    endOfLife: '2027-02-28',
  },
  'go1.27': {
    name: 'go1.27',
    version: '1.27.4-r1',
    baseImage: 'golang:1.27.4-bookworm',
    compiled: true,
    family: 'go',
    toolchain: '1.27',
    serverDir: 'go1.21',
    // Released August 2026; fixed until Go 1.29 ships (August 2027).
    endOfLife: '2027-08-31',
  },
};

/** A warning when `runtime` is past its end of life on `today` (an ISO date), else undefined. */
export function endOfLifeWarning(runtime: RuntimeName, today: string): string | undefined {
  const info = RUNTIME_INFO[runtime];
  if (today <= info.endOfLife) return undefined;
  const newer = Object.values(RUNTIME_INFO)
    .filter((r) => r.family === info.family && r.endOfLife >= today)
    .map((r) => r.name);
  return `runtime ${runtime} is past its end of life (${info.endOfLife}): it still builds and runs, but gets no upstream fixes${newer.length > 0 ? `; move to ${newer.join(' or ')}` : ''}`;
}
