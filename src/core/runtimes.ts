/**
 * The facts about each supported runtime that a build depends on: its version (bumped when its
 * server or base image changes), its pinned base image, and whether its entrypoint is compiled in.
 * Build keys are derived from them, so a runtime change rebuilds the functions that use it.
 */
import type { RuntimeName } from './schemas.js';

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
}

export const RUNTIME_INFO: Readonly<Record<RuntimeName, RuntimeInfo>> = {
  nodejs20: {
    name: 'nodejs20',
    version: '20.20.2-r1',
    baseImage: 'node:20.20.2-bookworm-slim',
    compiled: false,
  },
  'python3.11': {
    name: 'python3.11',
    version: '3.11.14-r1',
    baseImage: 'python:3.11.14-slim-bookworm',
    compiled: false,
  },
  'go1.21': { name: 'go1.21', version: '1.21.13-r1', baseImage: 'golang:1.21.13-bookworm', compiled: true },
};
