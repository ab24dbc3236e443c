/**
 * The smallest root a test's bubblewrap sandbox runs programs in: the host's /usr read-only, with the
 * merged-/usr links a Debian host has (/bin, /lib and /lib64 point into it).
 */
export const MINIMAL_BWRAP_ROOT: readonly string[] = [
  '--ro-bind',
  '/usr',
  '/usr',
  '--symlink',
  'usr/bin',
  '/bin',
  '--symlink',
  'usr/lib',
  '/lib',
  '--symlink',
  'usr/lib64',
  '/lib64',
];
