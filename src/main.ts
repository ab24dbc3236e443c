/**
 * The composition root: the two systems sless starts. Each is a list of constructors in src/systems/
 * (`local`, the embedded default, and `kube`, production); nothing else picks concrete implementations.
 */
export { createLogger } from './systems/common.js';
export { type KubeSystem, startKubeSystem } from './systems/kube.js';
export { type LocalSystem, startLocalSystem } from './systems/local.js';
