/**
 * `SLESS_BUILD_PACKAGE_MIRRORS`: where a kube build's dependency install fetches packages, for
 * clusters whose build pods reach no public registry (air-gapped, or behind a pull-through cache).
 * `NAME=value` entries separated by `;`, each a package manager's own setting, given to the install
 * step's container alone (see kaniko-job.ts). That container runs tenant code, so a value may not
 * carry a credential: a URL with a user or password in it is refused, as are names outside the list.
 */
import { ConfigError } from './config.js';

const SETTING = 'SLESS_BUILD_PACKAGE_MIRRORS';

/** The settings a mirror needs, and which of them are URLs (or lists of URLs, split by `split`). */
const MIRROR_SETTINGS: Readonly<Record<string, { urls: RegExp | undefined }>> = {
  // Go: a comma or pipe separated list of proxies, or the words direct and off among them.
  GOPROXY: { urls: /[,|]/ },
  GOSUMDB: { urls: undefined },
  GONOSUMDB: { urls: undefined },
  GOPRIVATE: { urls: undefined },
  GOINSECURE: { urls: undefined },
  // pip: one index, extra ones separated by spaces, and hosts trusted without TLS.
  PIP_INDEX_URL: { urls: / +/ },
  PIP_EXTRA_INDEX_URL: { urls: / +/ },
  PIP_TRUSTED_HOST: { urls: undefined },
  // npm's registry.
  NPM_CONFIG_REGISTRY: { urls: / +/ },
};

export interface BuildEnvEntry {
  readonly name: string;
  readonly value: string;
}

/** The entries of `value`, sorted by name; a clear error names the entry and why it is refused. */
export function parsePackageMirrors(value: string | undefined): readonly BuildEnvEntry[] {
  const entries = new Map<string, string>();
  for (const raw of (value ?? '').split(';')) {
    const entry = raw.trim();
    if (!entry) continue;
    const at = entry.indexOf('=');
    const name = at > 0 ? entry.slice(0, at).trim() : '';
    const setting = entry.slice(at + 1).trim();
    if (at <= 0 || !setting)
      throw new ConfigError(`${SETTING}: "${entry}" is not NAME=value (e.g. GOPROXY=http://mirror:3000)`);
    const known = MIRROR_SETTINGS[name];
    if (!known)
      throw new ConfigError(
        `${SETTING}: ${name} is not a package mirror setting; use one of ${Object.keys(MIRROR_SETTINGS).sort().join(', ')}`,
      );
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused.
    if (/[\u0000-\u001f\u007f]/.test(setting))
      throw new ConfigError(`${SETTING}: ${name} holds a control character`);
    if (entries.has(name)) throw new ConfigError(`${SETTING}: ${name} is given twice`);
    if (known.urls) {
      const parts = setting.split(known.urls).filter(Boolean);
      for (const [i, part] of parts.entries())
        refuseCredentials(name, part, parts.length > 1 ? i + 1 : undefined);
    }
    entries.set(name, setting);
  }
  return Object.freeze(
    [...entries]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([name, setting]) => Object.freeze({ name, value: setting })),
  );
}

/** A value is never echoed in an error: it may hold the very credential being refused. */
function refuseCredentials(name: string, part: string, position: number | undefined): void {
  if (name === 'GOPROXY' && (part === 'direct' || part === 'off')) return;
  const which = position === undefined ? name : `${name}'s entry ${position}`;
  let url: URL | undefined;
  try {
    url = new URL(part);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || !url.hostname)
    throw new ConfigError(`${SETTING}: ${which} is not an http:// or https:// URL`);
  if (url.username || url.password)
    throw new ConfigError(
      `${SETTING}: ${which} carries a credential, which the tenant code of every build could read; use a mirror that needs none`,
    );
}
