/**
 * Hand-written mutations of the guards in the README's security model and of the build and state
 * invariants: each weakens one guard the smallest plausible way, and names the test files that must
 * fail with it. `npm run mutate:guards` (test/mutations/run.ts) applies them one at a time in a
 * throwaway worktree and fails when one survives. `from` must occur exactly once in `file`.
 *
 * Adding a guard: write the weakening you would fear in review, run `npm run mutate:guards -- <id>`,
 * and if it survives, write the test at the level the guard acts (through the real entry point where
 * practical) until it is caught.
 */
export interface GuardMutation {
  /** Stable, kebab-case; what `npm run mutate:guards -- <id>` selects. */
  id: string;
  /** The guard this weakens, in one sentence. */
  guard: string;
  /** Repository-relative path of the file to edit. */
  file: string;
  /** Exact text, occurring exactly once in `file`. */
  from: string;
  /** Its replacement. */
  to: string;
  /** Test files (repository-relative) of which at least one must fail with the mutation. */
  tests: string[];
  /**
   * How long the test run may take before it counts as caught by a hang (default 10 min, or
   * SLESS_MUTATE_TEST_TIMEOUT_MS): for a mutation that makes the code under test spin.
   */
  timeoutMs?: number;
}

export const MUTATIONS: GuardMutation[] = [
  // ---- The /fn/ proxy ----
  {
    id: 'proxy-headers-timeout-dropped',
    guard:
      "The proxy bounds the wait for a function's answer by its own timeout (timeoutSec + 1 s), even when the runtime cannot answer by itself.",
    file: 'src/proxy/function-proxy.ts',
    from: '        headersTimeout: timeoutMs,\n',
    to: '',
    tests: ['test/local/proxy.test.ts'],
  },
  {
    id: 'proxy-timeout-not-504',
    guard: "The proxy's own timeout answers 504 with its own message, not a 502 'unreachable'.",
    file: 'src/proxy/function-proxy.ts',
    from: 'if (error instanceof undiciErrors.HeadersTimeoutError || error instanceof undiciErrors.BodyTimeoutError) {',
    to: 'if (error instanceof undiciErrors.BodyTimeoutError) {',
    tests: ['test/local/proxy.test.ts'],
  },

  // ---- Paths from repositories ----
  {
    id: 'symlink-only-repo-checked',
    guard:
      "A symlink in a function's code is materialised only when it stays inside the function's directory, not merely inside the repository.",
    file: 'src/packaging/materialize.ts',
    from: 'if (resolved === undefined || !isWithin(codeDir, resolved)) {',
    to: 'if (resolved === undefined) {',
    tests: ['test/local/symlinks.test.ts'],
  },
  {
    id: 'is-within-prefix',
    guard: 'A path is within a directory only below `dir/`: `fg/x` is not within `f`.',
    file: 'src/core/paths.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    from: 'path.startsWith(`${dir}/`)',
    to: 'path.startsWith(dir)',
    tests: ['src/core/paths.test.ts', 'test/local/symlinks.test.ts'],
  },
  {
    id: 'repo-path-dotdot-prefix',
    guard: 'A repository path that climbs out with `../` is refused (not only a bare `..`).',
    file: 'src/core/paths.ts',
    from: "if (normalized === '..' || normalized.startsWith('../')) return undefined;",
    to: "if (normalized === '..') return undefined;",
    tests: ['src/core/paths.test.ts', 'src/manifest/load.test.ts'],
  },
  {
    id: 'repo-path-absolute',
    guard: 'An absolute repository path is refused.',
    file: 'src/core/paths.ts',
    from: '  if (posix.isAbsolute(path)) return undefined;\n',
    to: '',
    tests: ['src/core/paths.test.ts', 'src/manifest/load.test.ts'],
  },

  // ---- Secrets and source caches per namespace ----
  {
    id: 'git-cache-without-namespace',
    guard:
      'Local git caches are per namespace: a commit one namespace fetched with its secret is not readable by another namespace naming the same URL.',
    file: 'src/platform/local/source-readers.ts',
    from: 'cacheDir: join(this.cacheDir, source.metadata.namespace),',
    to: 'cacheDir: this.cacheDir,',
    tests: ['test/local/git-credentials.test.ts'],
  },
  {
    id: 'secret-empty-value-counts',
    guard: 'An empty SLESS_SECRET_<NS>__<NAME>_TOKEN is no secret: the source fails with "no such secret".',
    file: 'src/platform/local/source-readers.ts',
    from: "if (password === undefined || password === '') return undefined;",
    to: 'if (password === undefined) return undefined;',
    tests: ['test/local/git-credentials.test.ts'],
  },
  {
    id: 'webhook-empty-secret-accepted',
    guard: 'A source whose webhook secret is empty takes no webhooks (an empty key would let anyone sign).',
    file: 'src/api/webhooks/plugin.ts',
    from: "if (secret === undefined || secret === '')",
    to: 'if (secret === undefined)',
    tests: ['test/api/webhooks.test.ts'],
  },
  {
    id: 'webhook-global-secret-allowed',
    guard: 'Start-up refuses a global SLESS_WEBHOOK_SECRET, which would sign for every namespace.',
    file: 'src/config/auth.ts',
    from: 'if (nonEmpty(env[WEBHOOK_PREFIX]) !== undefined)',
    to: 'if (false)',
    tests: ['src/config/auth.test.ts', 'test/api/webhooks.test.ts'],
  },

  // ---- Webhook signatures ----
  {
    id: 'webhook-hmac-not-constant-time',
    guard: 'HMAC signatures are compared in constant time.',
    file: 'src/api/webhooks/signature.ts',
    from: "return timingSafeEqual(expected, Buffer.from(providedHex, 'hex'));",
    to: "return expected.equals(Buffer.from(providedHex, 'hex'));",
    tests: ['src/api/webhooks/signature.test.ts'],
  },
  {
    id: 'webhook-token-not-constant-time',
    guard: 'GitLab tokens are compared in constant time, over equal-length digests.',
    file: 'src/api/webhooks/signature.ts',
    from: 'return timingSafeEqual(a, b);',
    to: 'return secret === provided;',
    tests: ['src/api/webhooks/signature.test.ts'],
  },
  {
    id: 'webhook-hmac-length-check-off',
    guard: 'A signature that is not exactly 64 hex digits is refused before comparing.',
    file: 'src/api/webhooks/signature.ts',
    from: 'if (!/^[0-9a-fA-F]{64}$/.test(providedHex)) return false;',
    to: 'if (!/^[0-9a-fA-F]*$/.test(providedHex)) return false;',
    tests: ['src/api/webhooks/signature.test.ts', 'test/api/webhooks.test.ts'],
  },

  // ---- JWT ----
  {
    id: 'jwt-audience-dropped',
    guard: 'A bearer JWT must name the configured audience.',
    file: 'src/api/auth/jwt.ts',
    from: '        audience: this.options.audience,\n',
    to: '',
    tests: ['src/api/auth/jwt.test.ts', 'test/api/auth.test.ts'],
  },
  {
    id: 'jwt-issuer-dropped',
    guard: 'A bearer JWT must come from the configured issuer.',
    file: 'src/api/auth/jwt.ts',
    from: '        issuer: this.options.issuer,\n',
    to: '',
    tests: ['src/api/auth/jwt.test.ts', 'test/api/auth.test.ts'],
  },
  {
    id: 'jwt-exp-not-required',
    guard: 'A bearer JWT without an expiry is refused.',
    file: 'src/api/auth/jwt.ts',
    from: "requiredClaims: ['sub', 'exp'],",
    to: "requiredClaims: ['sub'],",
    tests: ['src/api/auth/jwt.test.ts', 'test/api/auth.test.ts'],
  },
  {
    id: 'jwt-admin-truthy',
    guard: 'Only the admin claim set to the boolean true makes an admin (not "false", not 1).',
    file: 'src/api/auth/jwt.ts',
    from: 'admin: payload[this.options.adminClaim] === true,',
    to: 'admin: Boolean(payload[this.options.adminClaim]),',
    tests: ['src/api/auth/jwt.test.ts', 'test/api/auth.test.ts'],
  },

  // ---- Tenant isolation on /v1 ----
  {
    id: 'tenant-namespace-prefix',
    guard: 'A tenant acts only in its own namespace: exactly its name, not one that starts with it.',
    file: 'src/api/auth/plugin.ts',
    from: 'principal.namespace !== ns)',
    to: '!ns.startsWith(principal.namespace))',
    tests: ['src/api/auth/plugin.test.ts', 'test/api/auth.test.ts'],
  },
  {
    id: 'tenant-namespace-check-dropped',
    guard: "A non-admin's request to another namespace is refused.",
    file: 'src/api/auth/plugin.ts',
    from: "if (typeof ns === 'string' && !principal.admin && principal.namespace !== ns)",
    to: "if (typeof ns === 'string' && !principal.admin && principal.namespace === undefined)",
    tests: ['src/api/auth/plugin.test.ts', 'test/api/auth.test.ts'],
  },

  // ---- Without authentication: loopback only ----
  {
    id: 'loopback-host-unanchored',
    guard:
      'Without auth, only Host: localhost/127.x/[::1] is answered, not a name that merely starts with 127.x (127.0.0.1.nip.io).',
    file: 'src/api/auth/loopback-guard.ts',
    from: '/^127\\.\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}$/',
    to: '/^127\\.\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}/',
    tests: ['src/api/auth/loopback-guard.test.ts', 'test/security/loopback-browser.test.ts'],
  },
  {
    id: 'loopback-same-site-allowed',
    guard: 'Without auth, a browser fetch from another site is refused, same-site included (Sec-Fetch-Site).',
    file: 'src/api/auth/loopback-guard.ts',
    from: "if (typeof site === 'string' && !SAME_SITE_FETCH.has(site))",
    to: "if (site === 'cross-site')",
    tests: ['src/api/auth/loopback-guard.test.ts', 'test/security/loopback-browser.test.ts'],
  },

  // ---- Operator surfaces and settings ----
  {
    id: 'metrics-any-tenant',
    guard: 'With auth on, /metrics (which names every tenant) needs an admin token or the scrape token.',
    file: 'src/api/routes/health.ts',
    from: "  if (!principal.admin) throw new ForbiddenError('/metrics names every tenant: admins only');\n",
    to: '',
    tests: ['test/security/auth-surfaces.test.ts', 'test/api/auth.test.ts'],
  },
  {
    id: 'sandbox-off-flag-with-auth',
    guard:
      'With authentication on, --sandbox off is refused, whether it comes as a flag or as SLESS_SANDBOX.',
    file: 'src/config/config.ts',
    from: "if (sandbox === 'off' && !authDisabled)",
    to: "if (sandbox === 'off' && !authDisabled && env.SLESS_SANDBOX === 'off')",
    tests: ['src/config/config.test.ts', 'test/security/sandbox-required.test.ts'],
  },
  {
    id: 'yaml-aliases-unlimited',
    guard: 'A manifest file with more than 100 YAML aliases is refused (no billion laughs).',
    file: 'src/manifest/load.ts',
    from: 'const MAX_ALIASES = 100;',
    to: 'const MAX_ALIASES = -1;',
    tests: ['src/manifest/load.test.ts', 'test/security/repo-limits.test.ts'],
    // Without the limit the alias bomb of repo-limits expands without end, synchronously: a hang.
    timeoutMs: 150_000,
  },

  // ---- Quotas ----
  {
    id: 'quota-other-sources-ignored',
    guard: "The function quota counts the namespace's other sources' functions too, not only this commit's.",
    file: 'src/reconcile/source-sync.ts',
    from: '    if (others + mine <= deps.maxFunctions) return undefined;\n',
    to: '    return undefined;\n',
    tests: ['src/reconcile/source-sync.test.ts', 'test/security/tenant-settings.test.ts'],
  },

  // ---- Outbound address guard ----
  {
    id: 'outbound-first-answer-only',
    guard:
      'Every DNS answer is checked, so a mixed public/private answer cannot be raced into the private one.',
    file: 'src/source/outbound.ts',
    from: 'for (const { address } of addresses) {',
    to: 'for (const { address } of addresses.slice(0, 1)) {',
    tests: ['src/source/outbound.test.ts'],
  },
  {
    id: 'outbound-loopback-off-by-one',
    guard: 'The whole of 127.0.0.0/8 is loopback.',
    file: 'src/source/outbound.ts',
    from: "['127.0.0.0', 8, 'ipv4', 'a loopback'],",
    to: "['127.0.0.0', 9, 'ipv4', 'a loopback'],",
    tests: ['src/source/outbound.test.ts'],
  },
  {
    id: 'outbound-private-10-off-by-one',
    guard: 'The whole of 10.0.0.0/8 is private.',
    file: 'src/source/outbound.ts',
    from: "['10.0.0.0', 8, 'ipv4', 'a private'],",
    to: "['10.0.0.0', 9, 'ipv4', 'a private'],",
    tests: ['src/source/outbound.test.ts'],
  },
  {
    id: 'outbound-ipv6-literal-brackets',
    guard: 'An IPv6 address literal in a URL ([::1]) is checked like any other address.',
    file: 'src/source/outbound.ts',
    from: "const bare = hostname.replace(/^\\[|\\]$/g, '');",
    to: 'const bare = hostname;',
    tests: ['src/source/outbound.test.ts'],
  },
  {
    id: 'outbound-mapped-ipv4',
    guard: 'An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is judged by the IPv4 address it carries.',
    file: 'src/source/outbound.ts',
    from: "const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';",
    to: "const family = isIP(address) === 6 && !address.toLowerCase().startsWith('::ffff:') ? 'ipv6' : 'ipv4';",
    tests: ['src/source/outbound.test.ts'],
  },

  // ---- Builds and state ----
  {
    id: 'build-already-exists-fails',
    guard:
      'Build once: a build Job that already exists (another reconcile or replica made it) counts as ours.',
    file: 'src/platform/kube/build/kaniko-builder.ts',
    from: 'if (!isStatus(error, 409)) throw error;',
    to: 'throw error;',
    // builds.test.ts catches it only when its 50 reconciles happen to race past the builder's read
    // (caught once, survived once here); build-conflict.test.ts makes the race certain.
    tests: ['test/kube/build-conflict.test.ts', 'test/kube/builds.test.ts'],
  },
  {
    id: 'gc-serving-not-kept',
    guard: 'Build GC keeps the build that serves, whatever the history limit.',
    file: 'src/reconcile/build-gc.ts',
    from: '    build.serving ||\n',
    to: '',
    tests: ['src/reconcile/build-gc.test.ts', 'test/local/build-gc.test.ts'],
  },
  {
    id: 'gc-pinned-not-kept',
    guard: "Build GC keeps the build made at a source's pinned commit.",
    file: 'src/reconcile/build-gc.ts',
    from: '    rules?.buildKeys.has(build.buildKey) === true ||\n    (build.commit !== undefined && rules?.commits.has(build.commit) === true)',
    to: '    rules?.buildKeys.has(build.buildKey) === true',
    tests: ['src/reconcile/build-gc.test.ts', 'test/local/build-gc.test.ts'],
  },
  {
    id: 'gc-pending-job-not-kept',
    guard: 'Build GC keeps the build a pending FunctionJob is about to run.',
    file: 'src/reconcile/build-gc.ts',
    from: "if (phase !== 'Running' && phase !== 'Pending') continue;",
    to: "if (phase !== 'Running') continue;",
    tests: ['src/reconcile/build-gc.test.ts', 'test/local/build-gc.test.ts'],
  },

  // ---- Syncs, builds and the reconcile runtime ----
  {
    id: 'sync-coalesce-window-off',
    guard:
      'A webhook or poll within the coalescing window of a source joins the next sync instead of syncing again at once.',
    file: 'src/reconcile/controller.ts',
    from: 'if (slot.force || this.stopped || waitMs <= 0) return Promise.resolve();',
    to: 'return Promise.resolve();',
    tests: ['src/reconcile/sync-coalescing.test.ts'],
  },
  {
    id: 'sync-open-failure-unchanged',
    guard: 'A sync of a source that cannot be opened answers the failure and its reason, never "unchanged".',
    file: 'src/reconcile/controller.ts',
    from: 'if (!handle) return this.openFailure(namespace, name, opened);',
    to: 'if (!handle) return undefined;',
    tests: ['src/reconcile/sync-coalescing.test.ts'],
  },
  {
    id: 'inflight-second-task-per-key',
    guard:
      'A function has at most one build (and one rollout) running at a time, whatever the build key asked for.',
    file: 'src/reconcile/runtime/in-flight.ts',
    from: 'if (task && !task.settled) {',
    to: 'if (task && !task.settled && task.id === id) {',
    tests: ['src/reconcile/runtime/runtime.test.ts'],
  },
  {
    id: 'inflight-outcome-ignored',
    guard: "The pass after a build or rollout ends takes that task's outcome instead of starting it again.",
    file: 'src/reconcile/runtime/in-flight.ts',
    from: '    const finished = this.take(key, id);\n    if (finished) return finished;\n',
    to: '',
    tests: ['src/reconcile/runtime/runtime.test.ts', 'src/reconcile/function/reconciler.test.ts'],
  },
  {
    id: 'build-cache-granted-only-when-new',
    guard:
      "A namespace's package cache is handed to the user its sandboxed builds run as, also when an unsandboxed run created it.",
    file: 'src/platform/local/build/local-builder.ts',
    from: 'if (!this.grantedCaches.has(dir)) {',
    to: 'if (!existsSync(dir)) {',
    tests: ['test/local/build-cache.test.ts'],
  },
  {
    id: 'inflight-stale-rollout-taken',
    guard:
      'A rollout asked for again while it ran (a drift repaired meanwhile) is run again, not answered by the success that predates the drift.',
    file: 'src/reconcile/runtime/in-flight.ts',
    from: '    if (task.settled.ok && task.askedAgain && this.rerunWhenAskedAgain) return undefined;\n',
    to: '',
    tests: ['src/reconcile/runtime/runtime.test.ts', 'test/kube/rollout.test.ts'],
  },
  // ---- Secrets ----
  {
    id: 'secret-ref-namespace-allowed',
    guard: "A secret reference names no namespace: it resolves in the function's own namespace only.",
    file: 'src/manifest/validate.ts',
    from: "    if (key !== 'name' && key !== 'key')\n",
    to: "    if (key !== 'name' && key !== 'key' && key !== 'namespace')\n",
    tests: ['src/manifest/secret-refs.test.ts'],
  },
  {
    id: 'secret-looked-up-by-name-anywhere',
    guard: 'The local store finds a secret by namespace and name, never by its name in another namespace.',
    file: 'src/secrets/local-store.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a template literal
    from: '    const entry = this.entries.get(`${namespace}/${name}`);\n    return entry && { data: entry.data, hashKey: entry.hashKey };',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a template literal
    to: '    const entry = [...this.entries].find(([id]) => id.endsWith(`/${name}`))?.[1];\n    return entry && { data: entry.data, hashKey: entry.hashKey };',
    tests: ['test/local/secrets.test.ts', 'src/secrets/local-store.test.ts'],
  },
  {
    id: 'secret-missing-key-rolls-anyway',
    guard:
      'A referenced key missing from its secret stops the rollout (SecretNotFound naming secret and key) instead of starting a revision that cannot run.',
    file: 'src/secrets/references.ts',
    from: '    if (!Object.hasOwn(secrets.get(ref.name)?.data ?? {}, ref.key))',
    to: '    if (Date.now() < 0 && !Object.hasOwn(secrets.get(ref.name)?.data ?? {}, ref.key))',
    tests: ['test/local/secrets.test.ts', 'src/secrets/local-store.test.ts'],
  },
  {
    id: 'secret-hash-not-in-revision',
    guard: "The referenced values' hash is part of the revision, so a rotation rolls the function.",
    file: 'src/reconcile/function/reconciler.ts',
    from: 'secrets.configHash ? secrets.configHash(configHash) : configHash',
    to: 'configHash',
    tests: ['test/local/secrets.test.ts', 'test/kube/secrets.test.ts'],
  },
  {
    id: 'secret-change-not-requeued',
    guard: 'A secret set, rotated or deleted through the local store queues the functions that reference it.',
    file: 'src/main.ts',
    from: '  secrets.subscribe((namespace, name) => void requeueReferencing(store, controller, namespace, name));\n',
    to: '',
    tests: ['test/local/secrets.test.ts'],
    timeoutMs: 240_000,
  },
  {
    id: 'secret-file-mode-open',
    guard: "A function's secret files are 0400, its own to read.",
    file: 'src/platform/local/secret-files.ts',
    from: "{ mode: 0o400, flag: 'wx' }",
    to: "{ mode: 0o644, flag: 'wx' }",
    tests: ['test/local/secrets.test.ts'],
  },
  {
    id: 'sops-other-namespace-accepted',
    guard: "A SOPS Secret in a tenant's repository may only be of the source's own namespace.",
    file: 'src/secrets/repo-secrets.ts',
    from: '  if (metadata.namespace !== undefined && metadata.namespace !== namespace) {',
    to: '  if (metadata.namespace !== undefined && metadata.namespace !== namespace && Date.now() < 0) {',
    tests: ['test/local/secrets.test.ts', 'test/kube/secrets.test.ts'],
  },
  {
    id: 'sops-decrypt-failure-ignored',
    guard:
      'A SOPS file that does not decrypt rejects the commit like a bad manifest, and what runs keeps running.',
    file: 'src/secrets/repo-secrets.ts',
    from: "        add('', outcome.reason);\n",
    to: '',
    tests: ['test/local/secrets.test.ts'],
  },
  {
    id: 'rbac-secrets-not-watchable',
    guard:
      'deploy/rbac.yaml lets the controller list and watch Secrets (metadata), to roll functions on a rotation.',
    file: 'deploy/rbac.yaml',
    from: '    resources: [secrets]\n    verbs: [get, list, watch]',
    to: '    resources: [secrets]\n    verbs: [get]',
    tests: ['test/kube/rbac.test.ts'],
  },
];
