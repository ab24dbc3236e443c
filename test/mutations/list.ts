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
    id: 'websocket-upgrade-ignores-endpoints',
    guard:
      "A WebSocket goes to an instance of the serving revision the route's picker chooses, as a request does, not to the Service that may still send it to a replaced pod.",
    file: 'src/proxy/websocket-upgrade.ts',
    from: 'const origin = new URL(picked ?? route.origin);',
    to: 'const origin = new URL(route.origin);',
    tests: ['src/proxy/websocket-upgrade.test.ts', 'test/kube/runtime-streams.test.ts'],
  },
  {
    id: 'kube-route-sends-to-refusing-service',
    guard:
      "Once a function's EndpointSlices list no endpoint that serves, its requests wait for a replica instead of going to the Service address, which kube-proxy then refuses.",
    file: 'src/platform/kube/routes.ts',
    from: 'if (!endpoints && this.usesEndpoints() && cache.servesNowhere(namespace, name))',
    to: 'if (!endpoints && this.usesEndpoints() && cache.servesNowhere(namespace, name) && !fn)',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'kube-route-ignores-revoked-readiness',
    guard:
      'Pods whose Ready the control plane revoked while the kubelet still reports their containers ready keep serving /fn/ until a ready endpoint is listed, instead of every request being held.',
    file: 'src/platform/kube/route-cache.ts',
    from: 'if (found.length === 0) found = notReadyAddressesOf(slices?.values() ?? [], revoked);',
    to: 'if (found.length < 0) found = notReadyAddressesOf(slices?.values() ?? [], revoked);',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'kube-route-revoked-ignores-container-readiness',
    guard: "A pod failing the kubelet's readiness probe (ContainersReady False) never serves /fn/.",
    file: 'src/platform/kube/route-cache.ts',
    from: "return condition('Ready') === 'False' && condition('ContainersReady') === 'True';",
    to: "return condition('Ready') === 'False';",
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'kube-route-revoked-beside-ready',
    guard: 'While a ready endpoint of the serving revision is listed, a revoked one gets nothing.',
    file: 'src/platform/kube/route-cache.ts',
    from: 'if (found.length === 0) found = notReadyAddressesOf(slices?.values() ?? [], revoked);',
    to: 'found = found.concat(notReadyAddressesOf(slices?.values() ?? [], revoked));',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'kube-route-ignores-answering-pods',
    guard:
      "/fn/ moves to a new revision's pods once they answer /healthz, before the slices list them ready.",
    file: 'src/platform/kube/route-cache.ts',
    from: 'let found = [...new Set([...ready, ...this.starting.answering(namespace, name, revision)])].sort();',
    to: 'let found = ready;',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'kube-rollout-waits-for-kubelet-ready',
    guard:
      'A rollout whose every wanted replica answers is done, before the kubelet and the Deployment controller say so.',
    file: 'src/platform/kube/workloads.ts',
    from: "(progress.state === 'progressing' && this.answers(deployment, revision))",
    to: "(progress.state === 'progressing' && this.answers(deployment, revision) && !deployment)",
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'kube-rollout-done-on-first-answer',
    guard: 'An early end of a rollout waits for every replica the Deployment wants to answer, not the first.',
    file: 'src/platform/kube/workloads.ts',
    from: "this.answeringPods.answeringPods(namespace ?? '', fn, revision) >= wanted",
    to: "this.answeringPods.answeringPods(namespace ?? '', fn, revision) >= 1",
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'starting-pod-overrules-kubelet',
    guard:
      'Once the kubelet called a pod Ready, its later "not ready" stands: the pod is not asked and not served.',
    file: 'src/platform/kube/starting-pods.ts',
    from: '    } else if (tracked.seenReady) {',
    to: '    } else if (tracked.seenReady && !tracked) {',
    tests: ['src/platform/kube/starting-pods.test.ts'],
  },
  {
    id: 'starting-pod-asked-past-startup',
    guard:
      "A pod past its startup probe is the kubelet's to judge: sless does not ask it, so a failing probe keeps it out.",
    file: 'src/platform/kube/starting-pods.ts',
    from: 'status.containerStatuses?.some((c) => c.started !== true)',
    to: 'status.containerStatuses?.some((c) => c.started !== true || c)',
    tests: ['src/platform/kube/starting-pods.test.ts'],
  },
  {
    id: 'starting-pod-kept-after-restart',
    guard: 'A pod whose container restarted is asked again before it serves.',
    file: 'src/platform/kube/starting-pods.ts',
    from: 'tracked.revision !== revision || tracked.restarts !== restarts',
    to: 'tracked.revision !== revision',
    tests: ['src/platform/kube/starting-pods.test.ts'],
  },
  {
    id: 'kube-instances-ignore-answering-pods',
    guard:
      "A Function's ready instances count its pods that answer, as /fn/ does, not only those the kubelet called ready.",
    file: 'src/platform/kube/workloads.ts',
    from: 'ready: Math.max(status?.readyReplicas ?? 0, answering)',
    to: 'ready: Math.max(status?.readyReplicas ?? 0, 0 * answering)',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'prepull-container-root',
    guard:
      'The pre-pull DaemonSet runs every container as non-root, without privilege escalation or a token.',
    file: 'src/platform/kube/prepull.ts',
    from: 'const securityContext = { ...UNPRIVILEGED, readOnlyRootFilesystem: true };',
    to: 'const securityContext = { readOnlyRootFilesystem: true };',
    tests: ['src/platform/kube/prepull.test.ts'],
  },
  {
    id: 'prepull-gives-up-before-list',
    guard:
      'A leader that starts before the store has listed its Functions still applies the pre-pull DaemonSet.',
    file: 'src/platform/kube/prepull.ts',
    from: 'if (cached === undefined) return this.schedule(COALESCE_MS);',
    to: 'if (cached === undefined) return;',
    tests: ['test/kube/rbac.test.ts'],
  },
  {
    id: 'prepull-ignores-runtime-change',
    guard:
      'The pre-pull DaemonSet follows the runtimes in use: a new runtime is pulled, none left deletes it.',
    file: 'src/platform/kube/prepull.ts',
    from: "if (event.object.kind === 'Function' && !event.statusOnly) this.schedule(COALESCE_MS);",
    to: "if (event.object.kind === 'Function' && !event.statusOnly && !event) this.schedule(COALESCE_MS);",
    tests: ['test/kube/rbac.test.ts'],
  },
  {
    id: 'kube-pod-reason-misses-running-crashloop',
    guard:
      "A crash-looping pod read while it runs between two crashes is still named in the Function's status, by its restarts and its last exit.",
    file: 'src/platform/kube/rollout.ts',
    from: 'if (ended && (container.restartCount ?? 0) > 0)',
    to: 'if (ended && (container.restartCount ?? 0) > 1000)',
    tests: ['src/platform/kube/rollout.test.ts'],
  },
  {
    id: 'refused-function-cascades-to-its-references',
    guard:
      'A trigger or job naming a function that the repository defines but that was refused gets no "not defined" line of its own: only the function\'s own reason is shown.',
    file: 'src/manifest/load.ts',
    from: 'if (!functions.has(target) && !refusedFunctions.has(target)) {',
    to: 'if (!functions.has(target)) {',
    tests: ['src/manifest/load.test.ts'],
  },
  {
    id: 'kube-route-waits-for-lagging-deployment',
    guard:
      'A ready endpoint of the serving revision serves even while the Deployment still says no replica is available; requests are not held until its controller catches up.',
    file: 'src/platform/kube/routes.ts',
    from: '    if (available === 0 && !endpoints)',
    to: '    if (available === 0)',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
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

  {
    id: 'admission-queue-off-by-one',
    guard:
      'A function with a concurrency limit queues at most spec.scale.queue requests; the next is a 503 at once.',
    file: 'src/proxy/admission.ts',
    from: 'if (this.waiting.size >= this.limits.queue) return',
    to: 'if (this.waiting.size > this.limits.queue) return',
    tests: ['src/proxy/admission.test.ts', 'test/local/concurrency-queue.test.ts'],
  },
  {
    id: 'admission-lifo',
    guard: 'Queued requests of a function are admitted in the order they came (FIFO).',
    file: 'src/proxy/admission.ts',
    from: 'const next = this.waiting.values().next();',
    to: 'const next = { done: this.waiting.size === 0, value: [...this.waiting].at(-1) as Waiter };',
    tests: ['src/proxy/admission.test.ts'],
  },
  {
    id: 'admission-limit-off-by-one',
    guard: 'At most concurrency × instances requests of a function are in flight through one proxy.',
    file: 'src/proxy/admission.ts',
    from: 'while (this.inFlight < this.limits.limit) {',
    to: 'while (this.inFlight <= this.limits.limit) {',
    tests: ['src/proxy/admission.test.ts'],
  },
  {
    id: 'admission-client-gone-stays-queued',
    guard: 'A queued request whose client went away leaves the queue and never reaches the function.',
    file: 'src/proxy/admission-gates.ts',
    from: '      clearTimeout(timer);\n      admission.leave();\n',
    to: '      clearTimeout(timer);\n',
    tests: ['test/local/concurrency-queue.test.ts'],
  },
  {
    id: 'admission-ignored-by-proxy',
    guard: "The /fn/ proxy (both threads) applies a route's admission limits.",
    file: 'src/proxy/function-proxy.ts',
    from: 'if (route.admission) this.admit(',
    to: 'if (false as boolean && route.admission) this.admit(',
    tests: ['test/local/concurrency-queue.test.ts'],
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

  {
    id: 'secret-ref-any-namespace',
    guard:
      "A source's secretRef names a secret of the source's own namespace only: another namespace's source naming the operator's secret sends nothing.",
    file: 'src/platform/local/source-readers.ts',
    from: 'const credentials = secretName ? credentialsFromEnv(namespace, secretName, this.env) : undefined;',
    to: "const credentials = secretName ? credentialsFromEnv('default', secretName, this.env) : undefined;",
    tests: ['test/security/tenant-settings.test.ts', 'test/local/git-credentials.test.ts'],
  },
  {
    id: 'secret-missing-names-where-it-is',
    guard:
      'A secretRef to a secret the namespace does not have fails with the same words whether or not the secret exists elsewhere, so names cannot be probed.',
    file: 'src/platform/local/source-readers.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    from: 'throw new SourceError(`secretRef "${secretName}": no such secret in ${namespace}`, \'SecretNotFound\');',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    to: "throw new SourceError(`secretRef \"${secretName}\": no such secret in ${namespace}${credentialsFromEnv('default', secretName, this.env) ? ' (default has one)' : ''}`, 'SecretNotFound');",
    tests: ['test/security/tenant-settings.test.ts'],
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

  {
    id: 'jwks-failure-no-cooldown',
    guard:
      'After a JWKS fetch fails, requests answer 503 at once for the cool-down instead of each waiting out the timeout again.',
    file: 'src/api/auth/jwt.ts',
    from: '      if (!aboutToken) failedAt = now();',
    to: '      if (!aboutToken) failedAt = undefined;',
    tests: ['src/api/auth/jwt.test.ts'],
  },
  {
    id: 'jwks-timeout-unbounded',
    guard: 'A JWKS endpoint that hangs costs one bounded wait (2 s by default), not as long as it likes.',
    file: 'src/api/auth/jwt.ts',
    from: 'createRemoteJWKSet(url, { timeoutDuration: timeoutMs, cooldownDuration: 30_000 });',
    to: 'createRemoteJWKSet(url, { timeoutDuration: timeoutMs * 100, cooldownDuration: 30_000 });',
    tests: ['src/api/auth/jwt.test.ts'],
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
    id: 'pull-secret-may-be-push-secret',
    guard:
      "Tenants' functions pull with a pull-only secret: start-up refuses a pull secret that is the registry push secret.",
    file: 'src/config/kube.ts',
    from: '  if (source === pushSecret)\n',
    to: '  if (source === pushSecret && !source)\n',
    tests: ['src/platform/kube/tenant.test.ts'],
  },
  {
    id: 'image-pull-secrets-may-name-push-secret',
    guard:
      "Start-up refuses SLESS_IMAGE_PULL_SECRETS naming the push secret, which tenants' pods would then hold.",
    file: 'src/config/kube.ts',
    from: '  if (imagePullSecrets.includes(pushSecret))\n',
    to: '  if (imagePullSecrets[0] === pushSecret && imagePullSecrets.length > 1)\n',
    tests: ['src/platform/kube/tenant.test.ts'],
  },
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
    to: 'const MAX_ALIASES = Number.POSITIVE_INFINITY;',
    // load.test pins the limit (100 aliases taken, 101 refused) and fails at once. The alias bomb of
    // test/security/repo-limits is the attack end to end; without the limit it expands without end,
    // synchronously, so that file can only catch this by hanging.
    tests: ['src/manifest/load.test.ts'],
  },
  {
    id: 'yaml-aliases-off-by-one',
    guard: 'A manifest file may hold 100 YAML aliases; the 101st is refused.',
    file: 'src/manifest/load.ts',
    from: 'yamlDoc.toJS({ maxAliasCount: MAX_ALIASES + 1 })',
    to: 'yamlDoc.toJS({ maxAliasCount: MAX_ALIASES })',
    tests: ['src/manifest/load.test.ts'],
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

  {
    id: 'outbound-metadata-range-dropped',
    guard: 'The link-local range holding the cloud metadata address (169.254.169.254) is refused.',
    file: 'src/source/outbound.ts',
    from: "  ['169.254.0.0', 16, 'ipv4', 'a link-local or metadata'],\n",
    to: '',
    tests: ['src/source/outbound.test.ts'],
  },
  {
    id: 'outbound-carrier-nat-dropped',
    guard: 'The shared carrier-NAT range (100.64.0.0/10) is refused, as private ranges are.',
    file: 'src/source/outbound.ts',
    from: "  ['100.64.0.0', 10, 'ipv4', 'a shared (carrier NAT)'],\n",
    to: '',
    tests: ['src/source/outbound.test.ts'],
  },
  {
    id: 'outbound-unique-local-dropped',
    guard: 'IPv6 unique local addresses (fc00::/7, and so the metadata address fd00:ec2::254) are refused.',
    file: 'src/source/outbound.ts',
    from: "  ['fc00::', 7, 'ipv6', 'a private or metadata'],\n",
    to: '',
    tests: ['src/source/outbound.test.ts'],
  },
  {
    id: 'outbound-nat64-dropped',
    guard: 'NAT64 addresses (64:ff9b::/96), which can wrap a private IPv4 address, are refused.',
    file: 'src/source/outbound.ts',
    from: "  ['64:ff9b::', 96, 'ipv6', 'a NAT64'],\n",
    to: '',
    tests: ['src/source/outbound.test.ts'],
  },
  {
    id: 'outbound-lookup-not-on-connect',
    guard:
      'The git client checks the address of every connection it opens, so a name that rebinds to loopback after a good sync is refused on the next fetch.',
    file: 'src/source/guarded-http.ts',
    from: '    connect: { lookup: policy.lookup },\n',
    to: '',
    tests: ['test/security/dns-rebinding.test.ts'],
  },
  {
    id: 'outbound-operator-resolver-ignored',
    guard:
      "With SLESS_OUTBOUND_DNS set, tenant hosts are resolved by the operator's name servers, not the system resolver (its search domains, split-horizon zones and /etc/hosts).",
    file: 'src/source/outbound.ts',
    from: '    const resolve = (done: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) =>\n      this.resolver\n',
    to: '    const resolve = (done: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) =>\n      this.resolver && !this.resolver\n',
    tests: ['test/security/dns-rebinding.test.ts'],
  },

  {
    id: 'git-redirect-followed',
    guard:
      'The git client follows no redirect: a source answered 302 fails with the status alone, and the place it points to is never asked.',
    file: 'src/source/guarded-http.ts',
    from: '        return send();\n      });',
    to: "        return send();\n      }).then((first) => { const location = first.headers.location; return first.statusCode >= 300 && first.statusCode < 400 && typeof location === 'string' ? request(new URL(location, url), { method: 'GET', headers: req.headers ?? {}, dispatcher: agent }) : first; });",
    tests: ['test/security/tenant-settings.test.ts'],
  },
  {
    id: 'fetch-failure-echoes-answer',
    guard:
      "A source whose server does not answer as git says so in its status, never with the server's answer (which could be another service's metrics or keys).",
    file: 'src/source/readers.ts',
    from: "    return 'the server did not answer as a git smart HTTP server';",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    to: '    return `the server did not answer as a git smart HTTP server: ${(error as Error).message}`;',
    tests: ['test/security/tenant-settings.test.ts'],
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
  {
    id: 'rebuild-keeps-remembered-failure',
    guard: "The API's rebuild forgets the failed build it asks to retry, so the function is built again.",
    file: 'src/reconcile/controller.ts',
    from: '    const key = objectKey(namespace, name);\n    this.failedBuilds.delete(key);\n',
    to: '    const key = objectKey(namespace, name);\n',
    tests: ['test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'gc-history-limit-off-by-one',
    guard: 'Build GC keeps exactly the newest SLESS_BUILD_HISTORY finished builds, on both platforms.',
    file: 'src/reconcile/build-gc.ts',
    from: 'new Set(finished.slice(0, limit))',
    to: 'new Set(finished.slice(0, limit + 1))',
    tests: ['src/reconcile/build-gc.test.ts', 'test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },

  // ---- Syncs, builds and the reconcile runtime ----
  {
    id: 'sync-coalesce-window-off',
    guard:
      'A webhook or poll within the coalescing window of a source joins the next sync instead of syncing again at once.',
    file: 'src/reconcile/gitsource/syncs.ts',
    from: 'if (slot.force || this.stopped || waitMs <= 0) return Promise.resolve();',
    to: 'return Promise.resolve();',
    tests: ['src/reconcile/sync-coalescing.test.ts'],
  },
  {
    id: 'sync-open-failure-unchanged',
    guard: 'A sync of a source that cannot be opened answers the failure and its reason, never "unchanged".',
    file: 'src/reconcile/gitsource/syncs.ts',
    from: 'if (!reader) return openFailure(namespace, name, opened);',
    to: 'if (!reader) return undefined;',
    tests: ['src/reconcile/sync-coalescing.test.ts'],
  },
  {
    id: 'job-run-keyed-per-pass',
    guard:
      'A reconcile of a FunctionJob while its run goes on attaches to that run; it never starts a second.',
    file: 'src/reconcile/job/reconciler.ts',
    from: 'deps.runs.ensure(key, String(runId),',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    to: 'deps.runs.ensure(`${key}#${Math.random()}`, String(runId),',
    tests: ['src/reconcile/job/reconciler.test.ts'],
  },
  {
    id: 'source-open-failure-not-recorded',
    guard:
      'A source that cannot be opened says why in its status (Ready False, phase Failed), with the reason.',
    file: 'src/reconcile/gitsource/reconciler.ts',
    from: "update.status.phase = 'Failed';",
    to: '',
    tests: ['test/local/remote-source.test.ts'],
  },
  {
    id: 'rollout-waits-on-timer',
    guard: 'A rollout in progress reads its Deployment when the drift watch sees it change, not on a timer.',
    file: 'src/systems/kube.ts',
    from: '    http,\n    changes,\n    imagePullSecrets: config.imagePullSecrets,',
    to: '    http,\n    imagePullSecrets: config.imagePullSecrets,',
    tests: ['test/kube/watched-waits.test.ts'],
  },
  {
    id: 'build-waits-on-timer',
    guard:
      'A build in progress reads its Job when the build watch sees the Job or its pod change, not on a timer.',
    file: 'src/platform/kube/build/kaniko-builder.ts',
    from: 'const moved = this.options.changes?.next(buildJobKey(name), CHANGE_FALLBACK_MS);',
    to: 'const moved = undefined;',
    tests: ['test/kube/watched-waits.test.ts'],
  },
  {
    id: 'source-pin-ignored',
    guard:
      'A GitSource pinned to a commit of its branch serves that commit, not the branch head, on every platform.',
    file: 'src/reconcile/source-sync.ts',
    from: '  const target = pinned ?? head;\n',
    to: '  const target = head;\n',
    tests: ['test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'job-failed-run-rerun',
    guard: 'A FunctionJob run that failed is final for its runId, also after a restart of sless.',
    file: 'src/reconcile/job/reconciler.ts',
    from: "const finished = current.phase === 'Succeeded' || current.phase === 'Failed';",
    to: "const finished = current.phase === 'Succeeded';",
    tests: ['test/local/triggers-jobs.test.ts'],
  },
  {
    id: 'job-missing-function-not-failed',
    guard:
      'A FunctionJob naming a function its namespace does not have is Failed, saying so, on every platform.',
    file: 'src/reconcile/job/reconciler.ts',
    from: "  if (!fn) {\n    record(\n      'Failed',",
    to: "  if (!fn) {\n    record(\n      'Pending',",
    tests: ['test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'last-error-deleted-not-cleared',
    guard: 'Once the desired revision serves, status carries no error of a revision that failed before it.',
    file: 'src/reconcile/function/reconciler.ts',
    from: '  status.lastError = undefined;\n',
    to: '  delete status.lastError;\n',
    tests: ['test/platform/local.test.ts'],
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
  {
    id: 'stalled-error-requeued-with-backoff',
    guard:
      'A StalledError (a build verdict, a full quota) is written as Stalled and not requeued; only a retry-worthy failure goes back to the backoff.',
    file: 'src/reconcile/runtime/patch.ts',
    from: 'if (error instanceof StalledError || error instanceof WaitingError) {',
    to: 'if (error instanceof WaitingError) {',
    tests: ['src/reconcile/runtime/errors.test.ts', 'src/reconcile/function/reconciler.test.ts'],
  },
  {
    id: 'waiting-error-delay-ignored',
    guard: 'A WaitingError (a secret not there yet) is run again after exactly the delay it carries.',
    file: 'src/reconcile/runtime/patch.ts',
    from: '    return requeueAfter(error.requeueAfterMs);\n',
    to: '    return Done;\n',
    tests: ['src/reconcile/runtime/errors.test.ts'],
  },
  {
    id: 'source-stall-swallowed',
    guard:
      "A GitSource commit whose manifests are rejected or that is past the quota is thrown as a StalledError to the runtime's summary (Stalled), not caught as a sync failure.",
    file: 'src/reconcile/source-sync.ts',
    from: '    if (thrown instanceof StalledError) throw thrown;\n',
    to: '',
    tests: ['src/reconcile/source-sync.test.ts', 'src/reconcile/source-sync-stalled.test.ts'],
  },
  {
    id: 'source-stall-reconciling-left-behind',
    guard:
      'A GitSource that serves again after a stall keeps neither Stalled nor the Reconciling=False the stall wrote.',
    file: 'src/reconcile/source-sync.ts',
    from: "  const unstall = () => update.remove('Stalled').remove('Reconciling');",
    to: "  const unstall = () => update.remove('Stalled');",
    tests: ['src/reconcile/source-sync-stalled.test.ts'],
  },
  {
    id: 'canary-rollback-not-stalled',
    guard:
      'A canary that breaches its limits is rolled back and Stalled (CanaryRolledBack): only a new revision moves it on.',
    file: 'src/reconcile/function/canary-step.ts',
    from: '      throw rolledBack(status, message, serving);',
    to: "      input.setPhase('Failed', 'False', Reason.CanaryRolledBack, message + '; still serving ' + serving);\n      return Done;",
    tests: ['src/reconcile/function/canary-step.test.ts'],
  },
  {
    id: 'canary-rolled-back-unstalled-on-resync',
    guard: 'A rolled-back canary stays Stalled on every later pass until a new revision comes.',
    file: 'src/reconcile/function/canary-step.ts',
    from: '    throw rolledBack(status, message, serving);\n  }\n  let live',
    to: "    input.setPhase('Failed', 'False', Reason.CanaryRolledBack, message + '; still serving ' + serving);\n    return Done;\n  }\n  let live",
    tests: ['src/reconcile/function/canary-step.test.ts'],
  },
  {
    id: 'canary-step-begun-while-starting',
    guard:
      "A canary's step begins only once its start ended: a pass while it starts (its pods not yet serving) writes no step and starts no clock.",
    file: 'src/reconcile/function/canary-step.ts',
    from: '  if (!live || deps.rollouts.isRunning(key)) {',
    to: '  if (!live) {',
    tests: ['src/reconcile/function/canary-step.test.ts'],
  },
  {
    id: 'canary-start-failure-dropped',
    guard:
      'A canary that fails to start is reported Failed with RolloutFailed, the stable revision serving, and started again only after backoff.',
    file: 'src/reconcile/function/canary-step.ts',
    from: '      finished ??\n      deps.rollouts.ensure(',
    to: '      deps.rollouts.ensure(',
    tests: ['src/reconcile/function/canary-step.test.ts'],
  },

  // ---- The local sandbox (functions, FunctionJobs and build steps) ----
  {
    id: 'sandbox-net-namespace-dropped',
    guard: 'A function has a network namespace of its own: no network, not even the host loopback.',
    file: 'src/sandbox/bwrap-args.ts',
    from: "    '--unshare-net',\n",
    to: '',
    tests: ['test/security/sandbox-guards.test.ts', 'src/sandbox/sandbox.test.ts'],
  },
  {
    id: 'sandbox-pid-namespace-dropped',
    guard: "A tenant process has a pid namespace of its own: it sees no other process, sless's included.",
    file: 'src/sandbox/bwrap-args.ts',
    from: "    '--unshare-pid',\n",
    to: '',
    tests: ['test/security/sandbox-guards.test.ts', 'src/sandbox/sandbox.test.ts'],
  },
  {
    id: 'sandbox-user-namespace-dropped',
    guard: 'A tenant process runs in a user namespace of its own, as uid 1000 there.',
    file: 'src/sandbox/bwrap-args.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    from: "    options.view.unshare,\n    '--user',\n    `--map-user=${SANDBOX_UID}`,\n    `--map-group=${SANDBOX_UID}`,\n    '--',\n",
    to: '',
    tests: ['test/security/sandbox-guards.test.ts', 'src/sandbox/sandbox.test.ts'],
  },
  {
    id: 'sandbox-uid-not-dropped',
    guard: "A tenant process runs as its namespace's own unprivileged host uid, never as sless's root.",
    file: 'src/sandbox/bwrap-args.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    from: '    `--reuid=${options.uid}`,\n    `--regid=${options.uid}`,\n',
    to: '',
    tests: ['test/security/sandbox-guards.test.ts', 'src/sandbox/sandbox.test.ts'],
  },
  {
    id: 'sandbox-new-privileges-allowed',
    guard: 'A tenant process cannot gain privileges (no_new_privs), so no setuid program helps it.',
    file: 'src/sandbox/bwrap-args.ts',
    from: "    '--no-new-privs',\n",
    to: '',
    tests: ['test/security/sandbox-guards.test.ts', 'src/sandbox/sandbox.test.ts'],
  },
  {
    id: 'sandbox-ancestors-bound',
    guard:
      "Only a tenant's own paths are bound; the directories above them are made empty, so sless's state directory and other builds stay out of view.",
    file: 'src/sandbox/bwrap-args.ts',
    from: "locking the tenant out.\n      args.push('--perms', '0755', '--dir', dir);",
    to: "locking the tenant out.\n      args.push('--ro-bind', dir, dir);",
    tests: ['test/security/sandbox-guards.test.ts'],
  },
  {
    id: 'sandbox-build-writable',
    guard: "A function's build is read-only to it.",
    file: 'src/sandbox/bwrap-args.ts',
    from: "...options.readable]) bind('--ro-bind', path);",
    to: "...options.readable]) bind('--bind', path);",
    tests: ['test/security/sandbox-guards.test.ts'],
  },
  {
    id: 'sandbox-one-uid-for-all-namespaces',
    guard: 'Each namespace runs under a host uid of its own, so one tenant cannot signal or read another.',
    file: 'src/sandbox/launcher.ts',
    from: '      uid: tenantUid(spec.tenant),',
    to: "      uid: tenantUid('default'),",
    tests: ['test/security/sandbox-guards.test.ts'],
  },
  {
    id: 'sandbox-env-inherits-sless',
    guard: "A sandboxed process gets exactly its own environment, never sless's (tokens, keys, secrets).",
    file: 'src/sandbox/launcher.ts',
    from: '      env: { ...spec.env, PATH: this.options.path,',
    to: '      env: { ...process.env, ...spec.env, PATH: this.options.path,',
    tests: ['test/security/sandbox-guards.test.ts'],
  },
  {
    id: 'sandbox-build-host-loopback',
    guard: "A build step's network (slirp4netns) does not lead to the host's loopback, where sless listens.",
    file: 'src/sandbox/launcher.ts',
    from: "        '--disable-host-loopback',\n",
    to: '',
    tests: ['test/security/sandbox-guards.test.ts'],
  },
  {
    id: 'sandbox-cgroups-not-joined',
    guard: 'A tenant process joins its cgroups before it runs, so the limits cover everything it starts.',
    file: 'src/sandbox/launcher.ts',
    from: '  if (groups.procsFiles.length === 0) return command;',
    to: '  return command;',
    tests: ['test/security/sandbox-guards.test.ts'],
  },
  {
    id: 'cgroup-memory-limit-skipped',
    guard: 'memoryMb is set in the memory cgroup: memory outside the V8 heap (a Buffer) is limited too.',
    file: 'src/sandbox/cgroups.ts',
    from: '            : String(limits.memoryMb * 1024 * 1024)',
    to: '            : undefined',
    tests: ['test/security/sandbox-guards.test.ts'],
  },
  {
    id: 'cgroup-memory-limit-in-kib',
    guard: 'memoryMb is MiB in the memory cgroup, not a larger unit: 64 MiB cannot allocate 256 MiB.',
    file: 'src/sandbox/cgroups.ts',
    from: '            : String(limits.memoryMb * 1024 * 1024)',
    to: '            : String(limits.memoryMb * 1024 * 1024 * 8)',
    tests: ['test/security/sandbox-guards.test.ts'],
  },
  {
    id: 'cgroup-pids-limit-skipped',
    guard: 'A function can start at most 256 processes and threads (pids cgroup).',
    file: 'src/sandbox/cgroups.ts',
    from: "      if (controller.name === 'pids') writeFileSync(join(dir, 'pids.max'), value);",
    to: "      if (controller.name === 'pids') writeFileSync(join(dir, 'pids.max'), 'max');",
    tests: ['test/security/sandbox-guards.test.ts'],
  },
  {
    id: 'function-network-outbound',
    guard: 'A function has no network at all (only build steps get one): it serves over a unix socket.',
    file: 'src/platform/local/runtime-process.ts',
    from: "    network: 'none',",
    to: "    network: 'outbound',",
    tests: ['test/security/sandbox-guards.test.ts'],
  },
  {
    id: 'function-env-allow-list-unanchored',
    guard:
      "A function gets only PATH, HOME, LANG, LC_*, TMPDIR and TZ of sless's environment: not LANGSMITH_API_KEY because it starts with LANG.",
    file: 'src/platform/local/runtime-commands.ts',
    from: '|TMPDIR|TZ|SYSTEMROOT)$/;',
    to: '|TMPDIR|TZ|SYSTEMROOT)/;',
    tests: ['test/security/sandbox-guards.test.ts'],
  },
  {
    id: 'build-env-allow-list-unanchored',
    guard:
      "A build step gets only the package managers' variables of sless's environment, matched whole: not LANGSMITH_API_KEY because it starts with LANG.",
    file: 'src/platform/local/build/local-builder.ts',
    from: '|SSL_CERT_\\w+|NODE_EXTRA_CA_CERTS)$/;',
    to: '|SSL_CERT_\\w+|NODE_EXTRA_CA_CERTS)/;',
    tests: ['test/security/sandbox-guards.test.ts'],
  },

  // ---- Kube build pods ----
  {
    id: 'build-hold-never-told',
    guard: "What holds a running build's pod (an image it cannot pull) reaches the Function's status.",
    file: 'src/platform/kube/build/kaniko-builder.ts',
    from: 'onProgress?.(pods.map(buildPodHold).find((hold) => hold !== undefined));',
    to: 'void pods;',
    tests: ['test/kube/builds.test.ts'],
  },
  {
    id: 'build-hold-never-cleared',
    guard: 'Once nothing holds the build any more, its status says so: the old hold is not left standing.',
    file: 'src/reconcile/runtime/in-flight.ts',
    from: '      if (started.settled || started.note === text) return;',
    to: '      if (started.settled || started.note === text || text === undefined) return;',
    tests: ['test/kube/builds.test.ts'],
  },
  {
    id: 'build-hold-ignores-image-pull',
    guard: 'A build container waiting for a reason other than its ordinary course is a hold to report.',
    file: 'src/platform/kube/build/kaniko-builder.ts',
    from: 'if (waiting?.reason && !ORDINARY_WAITS.has(waiting.reason))',
    to: "if (waiting?.reason && !ORDINARY_WAITS.has(waiting.reason) && container.name !== 'install')",
    tests: ['test/kube/builds.test.ts'],
  },
  {
    id: 'package-mirror-credential-allowed',
    guard:
      'A package mirror URL with a user or password in it is refused: the install step runs tenant code, which would read it.',
    file: 'src/config/package-mirrors.ts',
    from: '  if (url.username || url.password)\n',
    to: '  if (url.username && url.password)\n',
    tests: ['src/config/kube.test.ts'],
  },
  {
    id: 'package-mirror-any-name',
    guard:
      'Only package manager settings may be given to the install step as mirrors, never another variable (a credential, a PATH).',
    file: 'src/config/package-mirrors.ts',
    from: '    const known = MIRROR_SETTINGS[name];\n',
    to: '    const known = MIRROR_SETTINGS[name] ?? { urls: undefined };\n',
    tests: ['src/config/kube.test.ts'],
  },
  {
    id: 'package-mirrors-reach-kaniko',
    guard:
      'Package mirror settings go to the install step, not to the kaniko container that holds the push secret.',
    file: 'src/platform/kube/build/kaniko-job.ts',
    from: 'args: kanikoArgs(settings, fn, commit, dependencyKey),',
    to: 'args: kanikoArgs(settings, fn, commit, dependencyKey), env: [...(settings.packageMirrors ?? [])],',
    tests: ['src/platform/kube/build/kaniko-job.test.ts'],
  },
  {
    id: 'kube-build-token-automounted',
    guard: 'A build pod gets no service-account token.',
    file: 'src/platform/kube/build/kaniko-job.ts',
    from: '          automountServiceAccountToken: false,',
    to: '          automountServiceAccountToken: true,',
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'kube-build-service-links',
    guard: "A build pod is told no Service's address through its environment (enableServiceLinks off).",
    file: 'src/platform/kube/build/kaniko-job.ts',
    from: '          enableServiceLinks: false,\n',
    to: '',
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'kube-build-run-as-root-allowed',
    guard: 'The install and sanitize steps must run as a non-root user.',
    file: 'src/platform/kube/build/kaniko-job.ts',
    from: '  runAsNonRoot: true,\n',
    to: '',
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'kube-build-privilege-escalation',
    guard: 'The install and sanitize steps cannot gain privileges.',
    file: 'src/platform/kube/build/kaniko-job.ts',
    from: '  allowPrivilegeEscalation: false,\n',
    to: '',
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'kube-build-capabilities-kept',
    guard: 'The install and sanitize steps drop every capability.',
    file: 'src/platform/kube/build/kaniko-job.ts',
    from: "  capabilities: Object.freeze({ drop: Object.freeze(['ALL']) }),\n",
    to: '',
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'kube-build-seccomp-unconfined',
    guard: 'The install and sanitize steps run under the runtime default seccomp profile.',
    file: 'src/platform/kube/build/kaniko-job.ts',
    from: "  seccompProfile: Object.freeze({ type: 'RuntimeDefault' }),\n",
    to: '',
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'kube-build-memory-unlimited',
    guard: 'Every container of a build pod has a memory limit.',
    file: 'src/platform/kube/build/kaniko-job.ts',
    from: "const resources = { requests: { cpu: '500m', memory: '512Mi' }, limits: { memory: '2Gi' } };",
    to: "const resources = { requests: { cpu: '500m', memory: '512Mi' } };",
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'kube-build-host-path',
    guard: "A build pod mounts none of the node's paths: its scratch space is an emptyDir.",
    file: 'src/platform/kube/build/kaniko-job.ts',
    from: "            { name: 'tmp', emptyDir: {} },",
    to: "            { name: 'tmp', hostPath: { path: '/tmp' } },",
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'kube-build-push-secret-in-sanitize',
    guard: 'Only kaniko mounts the registry push secret; the steps before it do not.',
    file: 'src/platform/kube/build/kaniko-job.ts',
    from: "                { name: 'dockerfile', mountPath: DOCKERFILE_DIR },\n",
    to: "                { name: 'dockerfile', mountPath: DOCKERFILE_DIR },\n                { name: 'docker-config', mountPath: '/kaniko/.docker', readOnly: true },\n",
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'kube-build-key-label-dropped',
    guard:
      'A build Job carries its build key as a label: builds are found by key, whatever commit started them.',
    file: 'src/platform/kube/build/kaniko-job.ts',
    from: '    [LABEL_BUILD_KEY]: buildKey,\n',
    to: '',
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'kaniko-dockerfile-from-workspace',
    guard:
      "kaniko builds the Dockerfile sless's sanitize step wrote to a scratch volume, never one from the workspace the tenant's install step wrote.",
    file: 'src/platform/kube/build/kaniko-job.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    from: '    `--dockerfile=${DOCKERFILE_DIR}/Dockerfile`,',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    to: '    `--dockerfile=${WORKSPACE}/Dockerfile`,',
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'kaniko-dockerfile-writable',
    guard: "kaniko, which holds the push secret, mounts its Dockerfile's volume read-only.",
    file: 'src/platform/kube/build/kaniko-job.ts',
    from: "                { name: 'dockerfile', mountPath: DOCKERFILE_DIR, readOnly: true },",
    to: "                { name: 'dockerfile', mountPath: DOCKERFILE_DIR },",
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'sanitize-top-level-links-only',
    guard:
      "The sanitize step removes every link out of the workspace, at any depth, so kaniko's COPY cannot be pointed at its own files (the push secret).",
    file: 'src/packaging/install-step.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    from: '    `find ${WORKSPACE} -type l -exec sh -c',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    to: '    `find ${WORKSPACE} -maxdepth 1 -type l -exec sh -c',
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'context-url-outlives-build',
    guard:
      "A build's presigned context URL is good for its Job's deadline and ten minutes more, not for days.",
    file: 'src/platform/kube/build/kaniko-builder.ts',
    from: '{ expiresIn: (this.options.deadlineSeconds ?? 1800) + 600 },',
    to: '{ expiresIn: 7 * 24 * 3600 },',
    tests: ['test/security/kube-build-credentials.test.ts'],
  },

  // ---- The /fn/ proxy and upstreams that never answer ----
  {
    id: 'proxy-body-timeout-dropped',
    guard:
      "An answer whose body stalls after its headers is cut after timeoutSec + 1 s of silence, not held for undici's 300 s.",
    file: 'src/proxy/function-proxy.ts',
    from: '        bodyTimeout: timeoutMs,\n',
    to: '',
    tests: ['src/proxy/upstream-stall.test.ts'],
  },
  {
    id: 'proxy-headers-timeout-upstream-silent',
    guard:
      "An upstream that takes the request and never sends a header gets the proxy's own 504 after timeoutSec + 1 s.",
    file: 'src/proxy/function-proxy.ts',
    from: '        headersTimeout: timeoutMs,\n',
    to: '',
    tests: ['src/proxy/upstream-stall.test.ts'],
  },

  // ---- Process quota ----
  {
    id: 'process-quota-replicas-not-counted',
    guard: 'The process quota counts every replica of a function, not one per function.',
    file: 'src/reconcile/process-quota.ts',
    from: '    const replicas = Math.max(1, Number(replicasOf(fn)));',
    to: '    const replicas = 1;',
    tests: ['test/security/process-quota.test.ts'],
  },
  {
    id: 'process-quota-off-by-one',
    guard: 'A namespace may run exactly its quota of processes: the last one fits.',
    file: 'src/reconcile/process-quota.ts',
    from: '    if (others + replicas > this.max) {',
    to: '    if (others + replicas >= this.max) {',
    tests: ['test/security/process-quota.test.ts', 'test/security/repo-limits.test.ts'],
  },
  {
    id: 'process-quota-counts-itself',
    guard: "A running function's change is admitted against the others' processes, not its own twice.",
    file: 'src/reconcile/process-quota.ts',
    from: '    for (const [other, count] of counts) if (other !== name) others += count;',
    to: '    for (const [, count] of counts) others += count;',
    tests: ['test/security/process-quota.test.ts'],
  },
  {
    id: 'process-quota-not-released',
    guard: "A deleted function's processes no longer count against its namespace.",
    file: 'src/reconcile/process-quota.ts',
    from: '    counts?.delete(name);\n',
    to: '',
    tests: ['test/security/process-quota.test.ts'],
  },
  {
    id: 'process-quota-room-not-handed-back',
    guard:
      'A function refused for want of room starts as soon as its namespace has room again, with no commit.',
    file: 'src/reconcile/process-quota.ts',
    from: '    if (held !== undefined) this.roomIn(namespace);',
    to: '',
    tests: ['test/security/process-quota.test.ts'],
  },

  // ---- Fair shares ----
  {
    id: 'fair-gate-no-warm-class',
    guard: 'A change to a function that serves goes ahead of never-deployed functions.',
    file: 'src/core/fair-gate.ts',
    from: 'const byTenant = this.waiting[task.warm ? 0 : 1];',
    to: 'const byTenant = this.waiting[1];',
    tests: ['src/core/fair-gate.test.ts'],
  },
  {
    id: 'fair-gate-running-not-counted',
    guard: 'The namespace with the fewest tasks running goes next, before the one served longest ago.',
    file: 'src/core/fair-gate.ts',
    from: '        this.runningByTenant.get(t) ?? 0,',
    to: '        0,',
    // fair-gate.test.ts alone let it survive: there the namespace served last never ran fewer tasks.
    tests: ['src/core/fair-gate-running.test.ts', 'src/core/fair-gate.test.ts'],
  },
  {
    id: 'fair-gate-flows-fifo',
    guard: 'Sources of one namespace take turns: the one served longest ago goes next.',
    file: 'src/core/fair-gate.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    from: '(f) => [0, this.lastServedFlow.get(`${tenant}/${f}`) ?? -1]',
    to: '(f) => [0, 0]',
    tests: ['src/core/fair-gate.test.ts'],
  },

  // ---- Limits on input ----
  {
    id: 'trigger-timezone-unchecked',
    guard:
      "A cron Trigger's timezone must be an IANA time zone name; anything else is refused naming the field.",
    file: 'src/manifest/validate.ts',
    from: "    if (typeof spec.timezone === 'string' && !TIME_ZONES.has(spec.timezone))",
    to: "    if (typeof spec.timezone === 'string' && TIME_ZONES.size === 0)",
    tests: ['src/manifest/validate.test.ts', 'test/security/tenant-settings.test.ts'],
  },
  {
    id: 'api-body-limit-raised',
    guard: 'API bodies over 1 MiB get 413.',
    file: 'src/api/app.ts',
    from: 'const bodyLimit = options.bodyLimit ?? 1024 * 1024;',
    to: 'const bodyLimit = options.bodyLimit ?? 16 * 1024 * 1024;',
    // The webhook routes take the app's limit: this one line bounds their bodies too.
    tests: ['test/api/negative.test.ts', 'test/api/webhooks.test.ts'],
  },
  {
    id: 'manifest-size-checked-after-inflate',
    guard: "A manifest blob over 1 MiB is refused by its object header's size, before it is inflated.",
    file: 'src/manifest/load.ts',
    from: '  if (size !== undefined && size > MAX_MANIFEST_BYTES) {',
    to: '  if (false) {',
    tests: ['src/manifest/load.test.ts', 'test/security/repo-limits.test.ts'],
  },
  {
    id: 'document-depth-raised',
    guard: 'A document (an event included) may be at most 32 levels deep.',
    file: 'src/manifest/validate.ts',
    from: 'export const MAX_DEPTH = 32;',
    to: 'export const MAX_DEPTH = 64;',
    tests: ['src/manifest/validate.test.ts', 'test/security/tenant-settings.test.ts'],
  },
  {
    id: 'document-depth-off-by-one',
    guard: 'The 33rd level of a document is refused, not only the 34th.',
    file: 'src/manifest/validate.ts',
    from: '    if (depth >= max) return',
    to: '    if (depth > max) return',
    tests: ['src/manifest/validate.test.ts'],
  },
  {
    id: 'event-size-raised',
    guard: 'An event is at most 32 KiB as JSON.',
    file: 'src/manifest/validate.ts',
    from: 'export const MAX_EVENT_BYTES = 32 * 1024;',
    to: 'export const MAX_EVENT_BYTES = 128 * 1024;',
    tests: ['src/manifest/validate.test.ts', 'test/security/tenant-settings.test.ts'],
  },

  // ---- More of the security model ----
  {
    id: 'secret-suffix-double-dash',
    guard:
      'A namespace or secret name with "--" has no local secret: "a--b"/"c" and "a"/"b--c" would read the same variable.',
    file: 'src/core/naming.ts',
    from: "  if (namespace.includes('--') || name.includes('--')) return undefined;\n",
    to: '',
    tests: ['src/core/naming.test.ts'],
  },
  {
    id: 'local-path-source-any-tenant',
    guard: 'A local repository path as a source URL is for admins only, not for any signed-in tenant.',
    file: 'src/api/routes/sources.ts',
    from: 'if (isLocalPath(source.spec.url) && !request.principal?.admin)',
    to: 'if (isLocalPath(source.spec.url) && !request.principal)',
    tests: ['test/api/auth.test.ts'],
  },
  {
    id: 'kube-sanitize-top-level-only',
    guard:
      "sless's sanitize step removes every link out of the workspace, however deep, before kaniko copies it.",
    file: 'src/packaging/install-step.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    from: 'find ${WORKSPACE} -type l -exec',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text itself, not a template
    to: 'find ${WORKSPACE} -maxdepth 1 -type l -exec',
    tests: ['test/security/kube-build-credentials.test.ts'],
  },
  {
    id: 'runtime-node-inherited-handler',
    guard: 'The Node runtime calls only a function the module itself defines, never an inherited one.',
    file: 'runtimes/nodejs20/server.js',
    from: 'const own = (object, key) => (Object.hasOwn(object, key) ? object[key] : undefined);',
    to: 'const own = (object, key) => object[key];',
    // The contract's fixture is an ES module, whose namespace inherits nothing: only a CommonJS
    // handler shows the difference.
    tests: ['test/runtimes/inherited-cjs.test.ts', 'test/runtimes/contract.test.ts'],
  },
  // ---- /fn/ under traffic: routes from watches, autoscaling ----
  {
    id: 'informer-forgets-on-outage',
    guard:
      'A dropped watch keeps the last known objects, so functions that were serving keep serving while the API server is down.',
    file: 'src/platform/kube/informer.ts',
    from: '        scope.connected = false;\n',
    to: '        scope.connected = false;\n        this.objects.clear();\n',
    tests: ['test/kube/api-outage.test.ts'],
  },
  {
    id: 'informer-stops-after-failure',
    guard:
      'A watch that failed is listed again once the API server answers, so the caches resync by themselves.',
    file: 'src/platform/kube/informer.ts',
    from: '        pause = Math.min(pause * 2, 5000);\n',
    to: '        return;\n',
    tests: ['test/kube/api-outage.test.ts'],
  },
  {
    id: 'kube-status-write-not-seen',
    guard:
      'A status the controller wrote is what its own /fn/ route reads at once, not one watch event later: a client that read Disabled is not then served.',
    file: 'src/platform/kube/kube-store.ts',
    from: '    this.sawWritten({ ...written, kind: object.kind });\n',
    to: '    void written;\n',
    tests: ['test/kube/store.test.ts'],
  },
  {
    id: 'function-activation-timeout-ignored',
    guard: "A function's own scaleToZero.activationTimeoutSec bounds how long its requests wait at zero.",
    file: 'src/platform/kube/scaler.ts',
    from: 'own !== undefined ? own * 1000 :',
    to: 'false ? 0 :',
    tests: ['test/kube/scale-to-zero.test.ts'],
  },
  {
    id: 'kube-apply-takes-replicas-from-scaler',
    guard:
      "The controller's apply leaves a scale-to-zero function's replicas to the scaler once it has scaled them: a new revision at zero stays at zero.",
    file: 'src/platform/kube/workloads.ts',
    from: '      else delete spec.replicas;\n    } else if',
    to: '    } else if',
    tests: ['test/platform/kube.test.ts', 'test/kube/scale-to-zero.test.ts'],
  },
  {
    id: 'scaled-to-zero-condition-kept-while-running',
    guard: 'A function woken from zero says so: its ScaledToZero condition turns False while it runs.',
    file: 'src/reconcile/function/reconciler.ts',
    from: "    if (atZero === false) update.set('ScaledToZero', 'False', Reason.Serving, 'running');\n",
    to: '',
    tests: ['test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'scaled-to-zero-condition-outlives-opt-out',
    guard: 'A function that stops scaling to zero loses its ScaledToZero condition.',
    file: 'src/reconcile/function/reconciler.ts',
    from: "  if (atZero === undefined) update.remove('ScaledToZero');\n",
    to: '',
    tests: ['test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'replica-wait-skipped',
    guard:
      "An always-on function's requests are held while its Deployment reports no available replica, not refused at once.",
    file: 'src/platform/kube/routes.ts',
    from: '        return this.waitForReplica(namespace, name, found.route);\n',
    to: '        return found.route;\n',
    tests: ['test/kube/replica-wait.test.ts'],
  },
  {
    id: 'replica-wait-unbounded',
    guard:
      'At most activationQueue requests of one function are held for a replica; the next is refused at once.',
    file: 'src/platform/kube/replica-wait.ts',
    from: "    if ((found?.settles.size ?? 0) >= this.options.maxHeldPerFunction) return Promise.resolve('full');\n",
    to: '',
    tests: ['test/kube/replica-wait.test.ts'],
  },
  {
    id: 'replica-wait-while-disconnected',
    guard: 'While the watches are down no change can come, so a request is not held for a replica.',
    file: 'src/platform/kube/replica-wait.ts',
    from: "    if (!this.options.cache.connected()) return Promise.resolve('disconnected');\n",
    to: '',
    tests: ['src/platform/kube/replica-wait.test.ts'],
  },
  {
    id: 'replica-wait-settles-unready',
    guard: 'A change of the function that leaves it without a replica keeps its requests held.',
    file: 'src/platform/kube/replica-wait.ts',
    from: '    if (!held?.ready()) return;\n',
    to: '    if (!held) return;\n',
    tests: ['src/platform/kube/replica-wait.test.ts'],
  },
  {
    id: 'replica-wait-unbounded-time',
    guard: 'A request is held for a replica at most the activation timeout, then answered 503.',
    file: 'src/platform/kube/replica-wait.ts',
    from: "      const timer = setTimeout(() => settle('timeout'), this.options.timeoutMs);\n",
    to: '      const timer = setTimeout(() => undefined, this.options.timeoutMs);\n',
    tests: ['test/kube/replica-wait.test.ts'],
  },
  {
    id: 'autoscale-max-unbounded',
    guard: 'The autoscaling decision never asks for more than spec.scale.max instances.',
    file: 'src/core/autoscale.ts',
    from: '  desired = Math.min(Math.max(desired, settings.min), settings.max);\n',
    to: '  desired = Math.max(desired, settings.min);\n',
    tests: ['src/core/autoscale.test.ts', 'test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'autoscale-panic-drops-stable',
    guard: "Panic only adds instances: the stable window's answer stands under it.",
    file: 'src/core/autoscale.ts',
    from: 'Math.max(wantPanic, wantStable, state.panicPeak)',
    to: 'Math.max(wantPanic, state.panicPeak)',
    tests: ['src/core/autoscale.test.ts'],
  },
  // ---- Autoscaling across controller replicas: followers' signed reports to the leader ----
  {
    id: 'replica-report-signature-unchecked',
    guard: "A replica's concurrency report counts only when its HMAC under the replicas' key matches.",
    file: 'src/core/replica-report.ts',
    from: "return timingSafeEqual(mac(key, body), Buffer.from(match[1] as string, 'hex'));",
    to: 'return true;',
    tests: ['src/core/replica-report.test.ts', 'test/kube/replica-concurrency.test.ts'],
  },
  {
    id: 'replica-report-route-skips-signature',
    guard:
      "The leader's report endpoint, which tenants' pods can reach, refuses a report whose signature does not verify with 401.",
    file: 'src/api/routes/replica-reports.ts',
    from: 'if (!signatureMatches(key, body, Array.isArray(header) ? header[0] : header)) {',
    to: 'if (header === undefined) {',
    tests: ['test/kube/replica-concurrency.test.ts'],
  },
  {
    id: 'replica-report-follower-records',
    guard: 'A replica that does not lead counts no report, even one addressed to it.',
    file: 'src/api/routes/replica-reports.ts',
    from: 'if (!intake.isLeader() || report.leader !== intake.identity)',
    to: 'if (report.leader !== intake.identity)',
    tests: ['test/kube/replica-concurrency.test.ts'],
  },
  {
    id: 'replica-report-old-accepted',
    guard: 'A signed report sent long ago (a captured one, replayed) is refused.',
    file: 'src/api/routes/replica-reports.ts',
    from: 'if (Math.abs(now - report.sentAt) > intake.maxSkewMs)',
    to: 'if (report.sentAt - now > intake.maxSkewMs)',
    tests: ['test/kube/replica-concurrency.test.ts'],
  },
  {
    id: 'replica-concurrency-never-expires',
    guard:
      "A replica's report stops counting three report intervals after it arrived (a dead replica's load goes).",
    file: 'src/core/replica-concurrency.ts',
    from: 'return now - held.receivedAt < this.freshForMs;',
    to: 'return true;',
    tests: ['src/core/replica-concurrency.test.ts'],
  },
  {
    id: 'replica-concurrency-max-not-sum',
    guard: "The leader's input is the sum over the replicas' fresh reports, not the largest of them.",
    file: 'src/core/replica-concurrency.ts',
    from: 'if (total !== undefined) sums.set(key, total + value);',
    to: 'if (total !== undefined) sums.set(key, Math.max(total, value));',
    tests: ['src/core/replica-concurrency.test.ts'],
  },
  {
    id: 'replica-concurrency-duplicate-renews',
    guard:
      'A report that arrives again (or out of order) is dropped: it neither replaces a newer one nor stays fresh longer.',
    file: 'src/core/replica-concurrency.ts',
    from: 'report.sentAt <= held.sentAt',
    to: 'report.sentAt < held.sentAt',
    tests: ['src/core/replica-concurrency.test.ts'],
  },
  {
    id: 'replica-reports-end-of-load-untold',
    guard:
      "When a follower's load is gone it tells the leader at once with one empty report, rather than leave its last load counted until that expires.",
    file: 'src/platform/kube/replica-reports.ts',
    from: 'const due = () => named || this.leaderHoldsLoad || this.pending.length > 0;',
    to: 'const due = () => named || this.pending.length > 0;',
    tests: ['src/platform/kube/replica-reports.test.ts'],
  },
  {
    id: 'replica-reports-send-time-repeats',
    guard:
      "A follower's reports carry strictly increasing send times, so the leader never drops a new one as a duplicate.",
    file: 'src/platform/kube/replica-reports.ts',
    from: 'this.lastSentAt = Math.max(now, this.lastSentAt + 1);',
    to: 'this.lastSentAt = now;',
    tests: ['src/platform/kube/replica-reports.test.ts'],
  },
  {
    id: 'kube-autoscaler-peers-ignored',
    guard: "While it leads, the autoscaler adds the followers' reported load to its own before deciding.",
    file: 'src/platform/kube/autoscaler.ts',
    from: 'concurrency: mine + (others?.get(key) ?? 0)',
    to: 'concurrency: mine',
    tests: ['src/platform/kube/autoscaler.test.ts', 'test/kube/replica-concurrency.test.ts'],
  },
  {
    id: 'kube-autoscaler-new-leader-scales-in',
    guard:
      "A new leader, whose samples lack the other replicas' load, does not scale in during its first stable window.",
    file: 'src/platform/kube/autoscaler.ts',
    from: 'if (newTerm && desired < replicas)',
    to: 'if (false && newTerm && desired < replicas)',
    tests: ['src/platform/kube/autoscaler.test.ts'],
  },
  {
    id: 'autoscaler-apply-noop',
    guard:
      "The leader's autoscaling decisions reach the Deployment: on a real node, a ramp of clients brings up the pods that the load asks for.",
    file: 'src/platform/kube/autoscaler.ts',
    from: 'spec: { replicas: desired },',
    to: 'spec: { replicas },',
    tests: ['test/e2e/autoscale-ramp.test.ts'],
  },
  {
    id: 'kube-routes-not-published',
    guard:
      "The kube controller tells the gateway thread each always-on function's route, so /fn/ is served there, apart from the main thread.",
    file: 'src/platform/kube/route-publisher.ts',
    from: 'this.options.mirror.publish(key, this.routeOf(key));',
    to: 'this.options.mirror.publish(key, undefined);',
    tests: ['test/kube/proxy-thread.test.ts'],
  },
  {
    id: 'kube-thread-requests-uncounted',
    guard:
      "An autoscaled function's requests served on the kube gateway thread are counted in the slot the autoscaler reads.",
    file: 'src/platform/kube/route-publisher.ts',
    from: 'return { ...found.route, ...(slot !== undefined ? { activitySlot: slot } : {}) };',
    to: 'return { ...found.route };',
    tests: ['test/kube/proxy-thread.test.ts'],
  },
  {
    id: 'kube-autoscaler-samples-instant',
    guard:
      'The kube autoscaler samples the time-weighted in-flight average since the last tick, so requests that end between ticks still count.',
    file: 'src/platform/kube/autoscaler.ts',
    from: 'const average = length > 0 ? (busyMs - tracked.busyMs) / length : this.board.inflightOf(slot);',
    to: 'const average = this.board.inflightOf(slot);',
    tests: ['src/platform/kube/autoscaler.test.ts'],
  },
  {
    id: 'activity-busy-time-dropped',
    guard:
      'The activity board keeps request-milliseconds per slot, so the kube autoscaler averages in-flight requests over time, whichever thread counted them.',
    file: 'src/core/activity-board.ts',
    from: '    Atomics.sub(this.busy, slot, BigInt(now));\n',
    to: '',
    tests: ['src/core/activity-board.test.ts'],
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
    from: '    const entry = this.entries.get(objectKey(namespace, name));\n    return entry && { data: entry.data, hashKey: entry.hashKey };',
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
    id: 'local-job-secret-files-dropped',
    guard:
      "A FunctionJob run on the local platform sees the function's secret files at their mountPath, as a serving process does.",
    file: 'src/platform/local/job-runner.ts',
    from: '        mounts: files.mounts,\n',
    to: '',
    tests: ['test/local/job-secrets.test.ts'],
  },
  {
    id: 'local-job-secret-files-kept',
    guard:
      'A finished FunctionJob run leaves no secret directory behind (the values stay in memory no longer than the run).',
    file: 'src/platform/local/job-runner.ts',
    from: '        // Gone before the outcome is told: a finished run leaves no secret behind.\n        await removeFiles();\n',
    to: '',
    tests: ['test/local/job-secrets.test.ts'],
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
    id: 'kube-secret-change-not-requeued',
    guard:
      'On kube, a Secret that changes queues the Functions that reference it, so a rotation rolls their pods without a commit.',
    file: 'src/platform/kube/wire/secrets.ts',
    from: '    watcher.watch((ns, name) => void requeueReferencing(store, requests, ns, name));',
    to: '    watcher.watch(() => undefined);',
    tests: ['test/kube/secrets.test.ts'],
  },
  {
    id: 'secret-change-not-requeued',
    guard: 'A secret set, rotated or deleted through the local store queues the functions that reference it.',
    file: 'src/platform/local/wire/secrets.ts',
    from: '  secrets.subscribe((namespace, name) => void requeueReferencing(store, requests, namespace, name));\n',
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
    tests: [
      'test/platform/local.test.ts',
      'test/platform/kube.test.ts',
      'test/local/secrets.test.ts',
      'test/kube/secrets.test.ts',
    ],
  },
  {
    id: 'sops-decrypt-failure-ignored',
    guard:
      'A SOPS file that does not decrypt rejects the commit like a bad manifest, and what runs keeps running.',
    file: 'src/secrets/repo-secrets.ts',
    from: "        add('', outcome.reason);\n",
    to: '',
    tests: ['test/platform/local.test.ts', 'test/platform/kube.test.ts'],
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
  {
    id: 'commit-revision-build-not-kept',
    guard:
      'A build that runs for a /fn/{ns}/{name}@{commit} request is kept by garbage collection until it stops.',
    file: 'src/platform/local/local-platform.ts',
    from: '    for (const dir of this.commits.buildDirs()) dirs.add(dir);\n',
    to: '',
    tests: ['test/local/commit-urls.test.ts'],
  },
  {
    id: 'commit-revision-never-idles',
    guard: 'A commit revision started for a request stops again once idle.',
    file: 'src/platform/local/commit-revisions.ts',
    from: "        'commit revision stopped, idle',\n      );\n      void this.end(entry);",
    to: "        'commit revision stopped, idle',\n      );",
    tests: ['test/local/commit-urls.test.ts'],
  },
  {
    id: 'canary-share-doubled',
    guard: "During a canary the new revision gets exactly its step's share of requests.",
    file: 'src/platform/local/canary-split.ts',
    from: '    this.credit -= 100;',
    to: '    this.credit -= 50;',
    tests: ['test/local/canary.test.ts'],
  },
  {
    id: 'kube-canary-follower-counts-dropped',
    guard:
      "On kube the leader judges a canary by every replica's answers: the counts a follower reports are absorbed into the canary's figures.",
    file: 'src/platform/kube/replica-reports.ts',
    from: '      for (const counts of batch.counts) this.receive(counts);',
    to: '      for (const counts of batch.counts) void counts;',
    tests: ['test/kube/canary-replicas.test.ts', 'src/platform/kube/replica-reports.test.ts'],
  },
  {
    id: 'kube-canary-batch-counted-twice',
    guard:
      "A follower's canary batch that arrives again (a retried or duplicated report) is not counted twice.",
    file: 'src/platform/kube/replica-reports.ts',
    from: '      if (batch.seq <= through) continue;',
    to: '      if (batch.seq < through) continue;',
    tests: ['src/platform/kube/replica-reports.test.ts'],
  },
  {
    id: 'kube-canary-counts-lost-on-failed-report',
    guard: 'Canary counts of a report the leader did not acknowledge go in the next report, not dropped.',
    file: 'src/platform/kube/replica-reports.ts',
    from: '      if (answer.ok || answer.status === 400 || answer.status === 413) {',
    to: '      if (true) {',
    tests: ['src/platform/kube/replica-reports.test.ts'],
  },
  {
    id: 'canary-error-rate-ignored',
    guard: 'A canary whose 5xx rate passes maxErrorRate is rolled back.',
    file: 'src/core/canary.ts',
    from: '    if (errorRateOf(figures) > maxErrorRate)',
    to: '    if (errorRateOf(figures) > 1)',
    tests: ['src/core/canary.test.ts', 'test/local/canary.test.ts'],
  },
  {
    id: 'canary-promoted-old-kept',
    guard: 'A promoted canary takes every request and the old revision is stopped.',
    file: 'src/platform/local/canary-rollouts.ts',
    from: '    slot.canary = undefined;\n    slot.parked = undefined;\n    this.switchTo(key, slot, split.revision);',
    to: '    slot.parked = undefined;',
    tests: ['test/local/canary.test.ts'],
  },
  {
    id: 'kube-canary-split-off-by-one',
    guard:
      "On kube, each proxy thread sends a canary exactly its step's weight of every hundred requests, at the same places.",
    file: 'src/proxy/canary-split.ts',
    from: '    if (!turns.takesNext(canary.weight)) return undefined;',
    to: '    if (!turns.takesNext(canary.weight + 1)) return undefined;',
    tests: ['src/proxy/canary-split.test.ts'],
  },
  {
    id: 'kube-canary-counts-not-absorbed',
    guard:
      'On kube, the leader judges a canary by the answers its proxy threads counted: a quarter of 5xx rolls it back in the first step.',
    file: 'src/platform/kube/canaries.ts',
    from: '      live.tally.absorb(count.requests, count.errors, count.latencies);',
    to: '',
    tests: ['test/kube/canary.test.ts'],
  },
  {
    id: 'kube-canary-orphan-kept',
    guard:
      'On kube, a canary Deployment no leader holds (sless killed mid-step) is deleted when a term begins, and the canary is set up anew.',
    file: 'src/platform/kube/canaries.ts',
    from: '          await deleteObject(this.options.http, DEPLOYMENT, ns, deployment.metadata.name);',
    to: '',
    tests: ['test/kube/canary.test.ts'],
  },
  {
    id: 'kube-canary-latencies-dropped',
    guard:
      "On kube, the leader judges a canary's p99 by the latencies its proxy threads measured: a revision slower than maxP99Ms is rolled back though it answers no error.",
    file: 'src/platform/kube/canaries.ts',
    from: '      live.tally.absorb(count.requests, count.errors, count.latencies);',
    to: '      live.tally.absorb(count.requests, count.errors, []);',
    tests: ['test/kube/canary.test.ts'],
  },
  {
    id: 'canary-newer-revision-keeps-old-canary',
    guard:
      "A new commit during a canary starts over from the serving revision: the running canary is aborted and the newer revision's takes its place.",
    file: 'src/reconcile/function/canary-step.ts',
    from: '  if (live && live.revision !== revision) {',
    to: '  if (live && live.revision === serving) {',
    tests: ['test/kube/canary.test.ts'],
  },
  {
    id: 'kube-canary-gateway-counts-dropped',
    guard:
      "On kube, a replica's canary counts include what its gateway thread counted, so a follower serving on that thread reports them to the leader.",
    file: 'src/platform/kube/wire/data-path.ts',
    from: '    ...((await gateway?.takeCanaryCounts?.()) ?? []),',
    to: '    ...[],',
    tests: ['test/kube/canary-replicas.test.ts'],
  },
  {
    id: 'canary-restart-starts-over',
    guard: 'After kill -9 a canary resumes at the step it was in, as its status recorded it.',
    file: 'src/reconcile/function/canary-step.ts',
    from: "previous?.revision === revision && previous.phase === 'Progressing' ? previous : undefined;",
    to: 'undefined as CanaryStatus | undefined;',
    tests: ['test/local/canary-restart.test.ts'],
  },
  {
    id: 'canary-resume-keeps-old-clock',
    guard:
      'A canary set up again after a restart begins its step anew, rather than judging it by the clock of the run that was killed.',
    file: 'src/reconcile/function/canary-step.ts',
    from: '(!inProgress || live.since > Date.parse(inProgress.stepStartedAt))',
    to: '!inProgress',
    tests: ['test/local/canary-restart.test.ts'],
  },
  {
    id: 'canary-p99-ignored',
    guard: 'A canary whose p99 passes maxP99Ms is rolled back, even when it answers no error.',
    file: 'src/core/canary.ts',
    from: '(figures.p99Ms ?? 0) > spec.maxP99Ms)',
    to: '(figures.p99Ms ?? 0) > spec.maxP99Ms * 100)',
    tests: ['test/local/canary.test.ts'],
  },
  // ---- What status reports of running instances ----
  {
    id: 'instances-ready-change-not-reported',
    guard:
      "A function's status follows its Deployment's ready instances: a change of readyReplicas alone queues the function.",
    file: 'src/platform/kube/drift-watch.ts',
    from: "return before.ready !== now.ready ? 'instances' : undefined;",
    to: 'return undefined;',
    tests: ['test/kube/drift-watch.test.ts', 'test/kube/autoscale.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'instances-status-heartbeat-reported',
    guard: 'A Deployment status write that keeps its ready instances queues nothing.',
    file: 'src/platform/kube/drift-watch.ts',
    from: "return before.ready !== now.ready ? 'instances' : undefined;",
    to: "return 'instances';",
    tests: ['test/kube/drift-watch.test.ts'],
  },
  {
    id: 'local-parked-counts-as-running',
    guard: 'A function scaled to zero on the local platform reports no desired instance.',
    file: 'src/platform/local/local-platform.ts',
    from: 'desired: slot.enabled && (running || !slot.parked) ? Math.max(slot.desiredInstances ?? 1, 1) : 0,',
    to: 'desired: slot.enabled ? Math.max(slot.desiredInstances ?? 1, 1) : 0,',
    tests: ['test/platform/local.test.ts'],
  },
  {
    id: 'local-commit-at-zero-starts',
    guard:
      'A new revision of a function the local platform parked at zero is parked too: nothing starts for it until a request comes.',
    file: 'src/platform/local/local-platform.ts',
    from: 'if (options.enabled && !slot.current && this.idleSecondsOf(fn) !== undefined) {',
    to: 'if (options.enabled && !slot.current && !slot.parked && this.idleSecondsOf(fn) !== undefined) {',
    tests: ['test/platform/local.test.ts', 'test/local/scale-to-zero.test.ts'],
  },
  // ---- Per-namespace caches ----
  {
    id: 'package-cache-shared-across-namespaces',
    guard:
      "A namespace's builds share a package cache with its own builds only, never with another namespace's.",
    file: 'src/platform/local/build/local-builder.ts',
    from: "const dir = join(this.options.cacheDir ?? join(this.options.stateDir, 'cache'), namespace);",
    to: "const dir = join(this.options.cacheDir ?? join(this.options.stateDir, 'cache'));",
    tests: ['test/local/build-cache.test.ts', 'test/security/sandbox-guards.test.ts'],
  },
  {
    id: 'local-scale-requests-not-balanced',
    guard: 'Locally, a request goes to the instance of the function with the fewest requests in flight.',
    file: 'src/platform/local/routes.ts',
    from: '        chosen = extra;',
    to: '        chosen = revision;',
    tests: ['test/local/autoscale.test.ts'],
  },
  {
    id: 'local-scale-down-without-drain',
    guard:
      'Locally, an instance the autoscaler lets go stops only after its requests in flight have answered.',
    file: 'src/platform/local/scale-out.ts',
    from: '      for (const instance of leaving) this.retireInBackground(instance);',
    to: '      for (const instance of leaving) void instance.process.stop();',
    tests: ['test/local/autoscale-drain.test.ts'],
  },
  // ---- Streamed answers in the runtimes ----
  {
    id: 'node-stream-signal-never-aborts',
    guard: "Node: a client that leaves a streamed answer aborts the handler's context.signal.",
    file: 'runtimes/nodejs20/server.js',
    from: "        if (!res.writableFinished) controller.abort(new Error('the client closed the connection'));",
    to: '        void controller;',
    tests: ['test/runtimes/streaming.test.ts'],
  },
  {
    id: 'python-stream-disconnect-unwatched',
    guard: 'Python: a client that leaves a streamed answer sets context.cancelled while the generator waits.',
    file: 'runtimes/python3.11/server.py',
    from: '        if data == b"" and not finished.is_set():\n            on_gone()',
    to: '        if data == b"" and not finished.is_set():\n            pass',
    tests: ['test/runtimes/streaming.test.ts'],
  },
  {
    id: 'go-stream-cut-at-timeout',
    guard: 'Go: a stream that has started is not cut when SLESS_TIMEOUT_SEC passes.',
    file: 'runtimes/go1.21/sdk/stream.go',
    from: '\tif c.state == streamStarted {\n\t\treturn false\n\t}\n\tc.cancelLocked(context.DeadlineExceeded)',
    to: '\tc.cancelLocked(context.DeadlineExceeded)',
    tests: ['test/runtimes/streaming.test.ts'],
  },
  {
    id: 'go-stream-client-gone-ignored',
    guard: "Go: a client that leaves a streamed answer cancels the handler's ctx.",
    file: 'runtimes/go1.21/sdk/stream.go',
    from: '\t\t\tcase <-c.parent.Done():\n\t\t\t\tc.cancel(context.Canceled)\n\t\t\t\treturn\n',
    to: '',
    tests: ['test/runtimes/streaming.test.ts'],
  },
  // ---- Streamed answers through /fn/ ----
  {
    id: 'proxy-stream-headers-held',
    guard:
      "The proxy sends a streamed answer's headers as soon as the function does, not with its first byte.",
    file: 'src/proxy/stream-limits.ts',
    from: '  res.flushHeaders();\n',
    to: '',
    tests: ['test/local/streaming.test.ts'],
  },
  {
    id: 'proxy-slow-reader-not-paused',
    guard:
      'A client that reads slower than the function writes pauses the upstream instead of filling memory.',
    file: 'src/proxy/answers.ts',
    from: '  controller.pause();\n',
    to: '',
    tests: ['test/local/streaming.test.ts'],
  },
  {
    id: 'proxy-stream-duration-unbounded',
    guard: 'A streamed answer is cut at the maximum stream duration, however steadily it sends.',
    file: 'src/proxy/stream-limits.ts',
    from: '  const timer = setTimeout(cut, maxMs);',
    to: '  const timer = setTimeout(() => {}, maxMs);',
    tests: ['test/local/streaming.test.ts'],
  },
  {
    id: 'kube-main-max-stream-default',
    guard:
      "The kube controller's main thread cuts a stream at SLESS_MAX_STREAM_DURATION, not at the default hour.",
    file: 'src/systems/kube/api.ts',
    from: '    maxStreamMs: config.maxStreamSeconds * 1000,\n',
    to: '',
    tests: ['test/kube/fn-limits.test.ts'],
  },
  {
    id: 'kube-gateway-max-stream-default',
    guard:
      "The kube controller's gateway thread cuts a stream at SLESS_MAX_STREAM_DURATION, not at the default hour.",
    file: 'src/cli/controller.ts',
    from: '  return Gateway.start(config.host, config.port, { maxStreamMs: config.maxStreamSeconds * 1000 });',
    to: '  return Gateway.start(config.host, config.port);',
    tests: ['test/kube/fn-limits.test.ts'],
  },
  {
    id: 'websocket-upgrade-skips-admission',
    guard:
      "An open WebSocket holds a slot of its function's concurrency limit: the next upgrade or request waits for it, or is a 503.",
    file: 'src/proxy/websocket-upgrade.ts',
    from: 'if (!route.admission || !admissions) {',
    to: 'if (true as boolean || !route.admission || !admissions) {',
    tests: ['src/proxy/websocket-upgrade.test.ts', 'test/local/websocket.test.ts'],
  },
  {
    id: 'websocket-queued-half-close-stays',
    guard: 'An upgrade whose client leaves while it is queued leaves the queue.',
    file: 'src/proxy/websocket-upgrade.ts',
    from: "    socket.once('end', leftWaiting);\n",
    to: '',
    tests: ['src/proxy/websocket-upgrade.test.ts'],
  },
  {
    id: 'local-main-upgrades-ungated',
    guard: "Locally, the main thread's WebSocket upgrades pass the same concurrency gates as its requests.",
    file: 'src/systems/local/data-path.ts',
    from: '    admissions: proxy.admissions,\n',
    to: '',
    tests: ['test/local/websocket.test.ts'],
  },
  {
    id: 'gateway-upgrades-ungated',
    guard: "The gateway thread's WebSocket upgrades pass the same concurrency gates as its requests.",
    file: 'src/server/gateway/worker.ts',
    from: '    admissions: proxy.admissions,\n',
    to: '',
    tests: ['test/local/websocket.test.ts', 'test/kube/fn-limits.test.ts'],
  },
  {
    id: 'kube-main-upgrades-ungated',
    guard: "On kube, the main thread's WebSocket upgrades pass the same concurrency gates as its requests.",
    file: 'src/systems/kube/api.ts',
    from: '    admissions: deps.admissions,\n',
    to: '',
    tests: ['test/kube/fn-limits.test.ts'],
  },
  {
    id: 'proxy-request-body-buffered',
    guard:
      'A request body goes to the function as it comes, chunk by chunk, not once the client has sent all of it.',
    file: 'src/proxy/function-proxy.ts',
    from: 'body: this.hasBody ? this.req : undefined,',
    to: 'body: this.hasBody ? ((async function* (r) { const all: Buffer[] = []; for await (const c of r) all.push(c as Buffer); yield Buffer.concat(all); })(this.req) as unknown as Buffer) : undefined,',
    tests: ['src/proxy/function-proxy.test.ts'],
  },
  {
    id: 'websocket-upgrade-one-way',
    guard:
      "Once a function accepts an upgrade, what it sends reaches the client: the tunnel joins both directions, on kube's main and gateway threads alike.",
    file: 'src/proxy/websocket-upgrade.ts',
    from: '      fnSocket.pipe(client);\n',
    to: '',
    tests: ['test/kube/runtime-streams.test.ts'],
    // The echo cases fail within seconds, but the file then hangs (a later case or its teardown) until
    // vitest's timeouts: cut it short.
    timeoutMs: 150_000,
  },
  {
    id: 'websocket-upgrade-without-host',
    guard:
      'An upgrade reaches the function with a Host header, without which a Go function refuses it (400).',
    file: 'src/proxy/websocket-upgrade.ts',
    from: "    if (!hasHeader(headers, 'host')) headers.push('host', route.socketPath ? 'localhost' : origin.host);\n",
    to: '',
    tests: ['test/local/websocket.test.ts'],
  },
  {
    id: 'proxy-idle-gap-unbounded',
    guard: "A stream whose gap between chunks passes the function's timeout is cut.",
    file: 'src/proxy/function-proxy.ts',
    from: '        bodyTimeout: timeoutMs,\n',
    to: '',
    tests: ['test/local/streaming.test.ts'],
  },
  {
    id: 'relayed-upgrade-headers-unbuilt',
    guard:
      "A WebSocket upgrade the proxy thread relays to the main thread is answered, not a crash of sless's main thread.",
    file: 'src/server/early-listener.ts',
    from: '        void req.headers;\n',
    to: '',
    // In-process (test/local/websocket.test.ts) the mutation takes the test's own process down, which
    // then waits out vitest's timeouts; the listener test runs the main thread's end in a child.
    tests: ['src/server/early-listener.test.ts'],
  },
  {
    id: 'go-upgrade-still-timed',
    guard: "Go: a connection handed to the handler (sless.Upgrade) is not ended by the function's timeout.",
    file: 'runtimes/go1.21/sdk/stream.go',
    from: '\tinv.state, inv.status = streamStarted, http.StatusSwitchingProtocols\n',
    to: '',
    tests: ['test/runtimes/streaming.test.ts'],
  },
  {
    id: 'python-upgrade-not-handed-over',
    guard: "Python: a request to switch protocols goes to the module's upgrade(), not to handle().",
    file: 'runtimes/python3.11/server.py',
    from: '        if self.headers.get("Upgrade"):\n            self._upgrade(path, qs)\n            return\n',
    to: '',
    tests: ['test/runtimes/streaming.test.ts'],
  },
  // ---- The dashboard and its change feed ----
  {
    id: 'events-other-namespace-objects',
    guard: "A namespace's event stream carries only that namespace's object writes, never another tenant's.",
    file: 'src/api/routes/events.ts',
    from: '          if (event.object.metadata.namespace !== ns) return;\n',
    to: '',
    tests: ['test/api/events.test.ts', 'test/ui/tenants.test.ts'],
  },
  {
    id: 'events-other-namespace-builds',
    guard: "A namespace's event stream carries only that namespace's builds, never another tenant's.",
    file: 'src/api/routes/events.ts',
    from: "          if (namespace === ns) stream.send('build', { name, build });",
    to: "          stream.send('build', { name, build });",
    tests: ['test/ui/tenants.test.ts'],
  },
  {
    id: 'events-not-ended-on-stop',
    guard: 'A stopping sless ends its event streams before it drains clients, so they never hold the drain.',
    file: 'src/api/routes/events.ts',
    from: "  options.stopping?.addEventListener('abort', endAll, { once: true });\n",
    to: '',
    tests: ['test/api/events.test.ts'],
  },
  {
    id: 'whoami-tenant-sees-all-namespaces',
    guard: 'whoami lists every namespace to an admin only; a tenant is told of its own alone.',
    file: 'src/api/routes/session.ts',
    from: '      if (principal.admin)',
    to: '      if (principal.admin || principal.subject !== "")',
    tests: ['test/ui/tenants.test.ts'],
  },
  {
    id: 'ui-asset-any-name',
    guard:
      'Only dashboard file names of one plain shape are served from dist/ui, so no path reaches beyond it.',
    file: 'src/api/ui/assets.ts',
    from: 'const ASSET_NAME = /^[a-z0-9][a-z0-9-]*\\.(js|css|svg)$/;',
    to: 'const ASSET_NAME = /^.*\\.(js|css|svg)$/;',
    tests: ['test/api/events.test.ts'],
  },
  {
    id: 'ui-token-left-in-address-bar',
    guard: 'A token given in the fragment leaves the address bar and the history entry at once.',
    file: 'ui/src/main.ts',
    from: "    history.replaceState(null, '', ",
    to: "    ((..._: unknown[]) => undefined)(null, '', ",
    tests: ['test/ui/tenants.test.ts'],
  },
  {
    id: 'ui-change-event-ignored',
    guard: 'The page applies each pushed change: what serves shows without a reload.',
    file: 'ui/src/main.ts',
    from: '      model.put(change.object);\n',
    to: '',
    tests: ['test/ui/dashboard.test.ts'],
  },
  // ---- Commit status on the git host ----
  {
    id: 'commit-status-token-logged',
    guard:
      'A commit status post that fails logs the source, commit, state and error, never the request and its token.',
    file: 'src/commitstatus/reporter.ts',
    from: "        { ...log, err: asError(error).message },\n        'commit status: host unreachable; retrying',",
    to: "        { ...log, request, err: asError(error).message },\n        'commit status: host unreachable; retrying',",
    tests: ['test/commitstatus/requests.test.ts'],
  },
  {
    id: 'commit-status-5xx-not-retried',
    guard: 'A host that answers 5xx gets the status again, with backoff, until it takes it.',
    file: 'src/commitstatus/reporter.ts',
    from: 'if (code >= 500 || code === 429 || code === 408) {',
    to: 'if (code === 429 || code === 408) {',
    tests: ['test/commitstatus/requests.test.ts'],
  },
  {
    id: 'commit-status-failed-function-pending',
    guard:
      'A function that failed at the commit makes its status a failure naming the file, not an endless pending.',
    file: 'src/commitstatus/decide.ts',
    from: "fn.status?.commit === commit && fn.status.phase === 'Failed'",
    to: "fn.status?.commit === commit && fn.status.phase === 'Broken'",
    tests: ['test/commitstatus/requests.test.ts'],
  },
  {
    id: 'event-stream-unbounded-backlog',
    guard: 'An event stream whose reader stops reading is cut past a bound instead of buffering without end.',
    file: 'src/api/event-stream.ts',
    from: 'if (this.out.writableLength > this.maxBuffered) {',
    to: 'if (this.out.writableLength > this.maxBuffered * 1e6) {',
    tests: ['src/api/event-stream.test.ts'],
  },
  // ---- Asynchronous invocations ----
  {
    id: 'async-202-before-durable',
    guard:
      'An asynchronous invocation is answered 202 only once its record is durable: a kill -9 loses none.',
    file: 'src/async/dispatcher.ts',
    from: '    try {\n      await this.options.store.put(record);\n    } catch (error) {',
    to: '    try {\n      void this.options.store.put(record);\n    } catch (error) {',
    tests: ['src/async/dispatcher.test.ts', 'test/local/async-invocations.test.ts'],
  },
  {
    id: 'async-4xx-retried',
    guard: "A function's 4xx answer ends its asynchronous invocation (failed) without another attempt.",
    file: 'src/core/invocations.ts',
    from: "  if (status >= 400 && status < 500) return 'failed';",
    to: "  if (status >= 400 && status < 500) return 'retry';",
    tests: ['test/platform/local.test.ts', 'test/platform/kube.test.ts', 'src/core/invocations.test.ts'],
  },
  {
    id: 'async-attempt-budget-off-by-one',
    guard: 'An invocation is dead-lettered after exactly spec.async.maxAttempts attempts.',
    file: 'src/async/dispatcher.ts',
    from: "if (verdict === 'retry' && countedAttempts(record) < record.maxAttempts) {",
    to: "if (verdict === 'retry' && countedAttempts(record) <= record.maxAttempts) {",
    tests: [
      'test/local/async-invocations.test.ts',
      'test/platform/local.test.ts',
      'test/platform/kube.test.ts',
    ],
  },
  {
    id: 'async-callback-guard-dropped',
    guard:
      'X-Callback-Url goes through the outbound address guard: loopback, private and metadata addresses are refused with a 400.',
    file: 'src/async/callback.ts',
    from: "    policy.checkHost(url.hostname);\n    const host = url.hostname.replace(/^\\[|\\]$/g, '');\n    await promisify(policy.lookup)(host, { all: true });\n",
    to: '',
    tests: ['test/local/async-invocations.test.ts', 'src/async/callback.test.ts'],
  },
  {
    id: 'async-interrupted-attempt-not-resumed',
    guard: 'An attempt a kill -9 interrupted is recorded as interrupted at the next start and sent again.',
    file: 'src/async/dispatcher.ts',
    from: "      if (record.state === 'running') {",
    to: "      if (record.state === 'queued' && record.attempts.length < 0) {",
    tests: ['src/async/dispatcher.test.ts', 'test/local/async-invocations.test.ts'],
  },
  {
    id: 'kube-async-kill-attempt-not-marked-interrupted',
    guard:
      'On kube, the attempts a SIGKILL of the leader cut are recorded interrupted by the new leader and cost no attempt: only those may have been seen by the function twice.',
    file: 'src/async/dispatcher.ts',
    from: "Object.assign(last, { interrupted: true, error: 'sless stopped during this attempt' });",
    to: "Object.assign(last, { error: 'sless stopped during this attempt' });",
    tests: ['test/kube/async-kill.test.ts'],
  },
  {
    id: 'amqp-disabled-still-consumes',
    guard: 'An amqp Trigger with enabled: false consumes nothing and leaves its messages queued.',
    file: 'src/queue/queue-triggers.ts',
    from: '    if (!fn || spec.enabled === false || this.stopped) {',
    to: '    if (!fn || this.stopped) {',
    tests: ['test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'amqp-disabled-trigger-disables-function',
    guard: 'A disabled amqp Trigger pauses its consumer only; its function goes on serving /fn/.',
    file: 'src/reconcile/function/reconciler.ts',
    from: "    t.spec.type !== 'amqp';",
    to: '    true;',
    tests: ['test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'amqp-attempts-off-by-one',
    guard: 'A queue message is delivered at most maxAttempts times before it is dead-lettered.',
    file: 'src/queue/amqp-consumer.ts',
    from: '    while (attempt < options.maxAttempts) {',
    to: '    while (attempt <= options.maxAttempts) {',
    tests: ['test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'amqp-ack-on-failure',
    guard:
      'A queue message is acknowledged only on a 2xx (or once its dead letter is confirmed), never on a failed delivery.',
    file: 'src/queue/amqp-consumer.ts',
    from: "      if (verdict === 'succeeded') {\n        channel.ack(message);",
    to: "      channel.ack(message);\n      if (verdict === 'succeeded') {",
    tests: ['test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'amqp-closed-channel-left-consuming',
    guard:
      'A channel the broker closed (a dead letter to a missing exchange) reconnects the consumer, so its messages are consumed again rather than left on a dead channel.',
    file: 'src/queue/amqp-consumer.ts',
    from: '        if (!this.stopped && this.channel === channel) void connection.close().catch(() => undefined);',
    to: '        if (this.stopped && this.channel !== channel) void connection.close().catch(() => undefined);',
    tests: ['test/local/amqp-trigger.test.ts'],
  },
  {
    id: 'amqp-no-dead-letters-condition',
    guard:
      'An amqp Trigger without a deadLetterExchange warns in its DeadLetters condition that failed messages are rejected and dropped; one with it names the exchange.',
    file: 'src/reconcile/trigger/reconciler.ts',
    from: "  if (trigger.spec.type === 'amqp') setDeadLetters(trigger, update);",
    to: '  if (trigger.spec.function === undefined) setDeadLetters(trigger, update);',
    tests: [
      'src/reconcile/trigger/reconciler.test.ts',
      'test/platform/local.test.ts',
      'test/platform/kube.test.ts',
    ],
  },
  // ---- Asynchronous invocations and amqp Triggers on kube (RabbitMQ) ----
  {
    id: 'kube-async-callback-guard-unwired',
    guard:
      'On kube too, an X-Callback-Url to a loopback, link-local or metadata address is refused with 400 before anything is stored.',
    file: 'src/platform/kube/wire/async.ts',
    from: '    checkCallback: (url) => checkCallbackUrl(deps.policy, url),',
    to: '    checkCallback: async (url) => url,',
    tests: ['test/kube/async-invocations.test.ts'],
  },
  {
    id: 'kube-async-open-no-retry',
    guard:
      'Opening the invocation stream tries again while the broker resets or refuses connections, so a controller starting beside a slow broker comes up.',
    file: 'src/platform/kube/invocation-store.ts',
    from: "      await store.retrying('open', deadline, () => store.connect());",
    to: '      await store.connect();',
    tests: ['test/kube/invocation-stream.test.ts'],
  },
  {
    id: 'kube-async-resume-offset-off-by-one',
    guard:
      "A replica's tail of the invocation stream resumes after a reconnection at the offset after the last entry it applied, skipping none.",
    file: 'src/platform/kube/invocation-store.ts',
    from: "        arguments: { 'x-stream-offset': this.nextOffset },",
    to: "        arguments: { 'x-stream-offset': typeof this.nextOffset === 'number' ? this.nextOffset + 1 : this.nextOffset },",
    tests: ['test/kube/invocation-stream.test.ts'],
  },
  {
    id: 'kube-async-write-no-retry',
    guard:
      'A journal write the broker did not take (disconnected, unconfirmed) is sent again once reconnected, until its deadline.',
    file: 'src/platform/kube/invocation-store.ts',
    from: "    await this.retrying('write', until, () => this.publishOnce(content, sequence));",
    to: '    await this.publishOnce(content, sequence);',
    tests: ['test/kube/invocation-stream.test.ts'],
  },
  {
    id: 'invocation-sweep-takes-dead-letters',
    guard:
      'The sweep of old invocation records keeps dead letters until someone looks at them, on both platforms.',
    file: 'src/core/invocation-records.ts',
    from: "      record.state !== 'dead-lettered' &&\n",
    to: '',
    tests: ['src/core/invocation-records.test.ts'],
  },
  {
    id: 'invocation-unfinished-drops-pending-callback',
    guard:
      'A finished invocation whose callback is still to be sent is taken up again after a restart or a new leader.',
    file: 'src/core/invocation-records.ts',
    from: "    .filter((r) => !FINAL_STATES.has(r.state) || r.callback?.state === 'pending')",
    to: '    .filter((r) => !FINAL_STATES.has(r.state))',
    tests: ['src/core/invocation-records.test.ts', 'test/local/async-invocations.test.ts'],
  },
  {
    id: 'url-password-left-in-message',
    guard:
      "A broker URL's password never appears in a message that leaves sless (the amqp Trigger's status, the invocation stream's errors).",
    file: 'src/core/redact-url.ts',
    from: '  if (!password) return message;',
    to: '  return message;',
    tests: ['src/core/redact-url.test.ts'],
  },
  {
    id: 'kube-async-workers-on-follower',
    guard:
      "Only the leader runs the asynchronous invocation workers, one dispatcher per term; a follower's would run the leader's invocations a second time.",
    file: 'src/systems/kube/async.ts',
    from: '        leaderTasks: term,\n        ...(deps.leader ? { leader: deps.leader } : {}),',
    to: '        leaderTasks: { register: (_name: string, start: () => unknown) => void start() },\n        ...(deps.leader ? { leader: deps.leader } : {}),',
    tests: ['test/kube/async-invocations.test.ts'],
  },
  {
    id: 'kube-amqp-consumers-outlive-term',
    guard:
      "A leader term's amqp consumers stop when it ends, so no message is taken by a replica that no longer delivers it.",
    file: 'src/platform/kube/wire/async.ts',
    from: '      await term?.stopAll();',
    to: '      void term;',
    tests: ['test/kube/amqp-trigger.test.ts'],
  },
  // ---- The code-layer fast path of kube builds ----
  {
    id: 'code-layer-dependency-label-unchecked',
    guard:
      "The code-layer path builds only on an image whose config label says it holds the tree's dependencies.",
    file: 'src/platform/kube/build/code-layer-build.ts',
    from: '    if (label !== dependencyKey)\n',
    to: '    if (label !== dependencyKey && Date.now() < 0)\n',
    tests: ['test/kube/code-layer.test.ts'],
  },
  {
    id: 'code-layer-last-step-unchecked',
    guard: "The code-layer path replaces a base image's last layer only when that layer is the code's COPY.",
    file: 'src/platform/kube/build/code-layer-build.ts',
    from: '    if (!lastStep.includes(CODE_COPY))\n',
    to: '    if (!lastStep.includes(CODE_COPY) && Date.now() < 0)\n',
    tests: ['test/kube/code-layer.test.ts'],
  },
  {
    id: 'code-layer-appended-not-replaced',
    guard:
      "The code-layer image replaces the earlier image's code layer; the old code does not stay beneath.",
    file: 'src/platform/kube/build/code-layer-build.ts',
    from: '      layers: [...manifest.layers.slice(0, -1), codeDescriptor],\n',
    to: '      layers: [...manifest.layers, codeDescriptor],\n',
    tests: ['test/kube/code-layer.test.ts'],
  },
  {
    id: 'dependency-key-without-lock-file',
    guard:
      'A package.json without a lock file has no dependency key: its install may resolve other versions.',
    file: 'src/core/dependency-key.ts',
    from: "  if (!inputs.has('package-lock.json') && !inputs.has('npm-shrinkwrap.json'))\n",
    to: "  if (!inputs.has('package-lock.json') && !inputs.has('npm-shrinkwrap.json') && Date.now() < 0)\n",
    tests: ['src/core/dependency-key.test.ts'],
  },
  {
    id: 'dependency-key-install-scripts-ignored',
    guard: 'A package.json whose own install scripts run beside the code has no dependency key.',
    file: 'src/core/dependency-key.ts',
    from: '    if (ran.length > 0) return',
    to: '    if (ran.length < 0) return',
    tests: ['src/core/dependency-key.test.ts'],
  },
  // ---- Runtimes and their toolchains ----
  {
    id: 'toolchain-node-line-unchecked',
    guard:
      'Locally, a Node.js runtime runs only on a node of its own major version, never on whichever node is there.',
    file: 'src/platform/local/toolchains.ts',
    from: '        if (lineOf(version, 1) === wanted && version)',
    to: '        if (version)',
    tests: ['test/local/runtimes.test.ts', 'test/cli/validate.test.ts'],
  },
  {
    id: 'toolchain-go-line-unchecked',
    guard:
      "Locally, a Go runtime newer than go1.21 builds with Go of its own line (the machine's go only when it is of that line), never with whichever go is there.",
    file: 'src/platform/local/toolchains.ts',
    from: "      if (runtime === 'go1.21' || lineOf(version, 2) === wanted) return",
    to: "      if (runtime.startsWith('go') || lineOf(version, 2) === wanted) return",
    tests: ['test/local/runtimes.test.ts', 'test/runtimes/contract.test.ts'],
  },
  {
    id: 'toolchain-go-release-unpinned',
    guard:
      'Locally, a Go line the machine has no go of builds with the release its kube image pins, fetched through GOTOOLCHAIN.',
    file: 'src/platform/local/toolchains.ts',
    from: 'env: { GOTOOLCHAIN: pinned }',
    to: 'env: {}',
    tests: ['test/local/runtimes.test.ts', 'test/runtimes/contract.test.ts'],
  },
  {
    id: 'end-of-life-never-warned',
    guard: 'A runtime past its end of life is warned about in validate and status.',
    file: 'src/core/runtimes.ts',
    from: '  if (today <= info.endOfLife) return undefined;',
    to: '  if (today <= info.endOfLife || today) return undefined;',
    tests: ['src/core/runtimes.test.ts'],
  },
  // ---- Reconcile requests from watchers beside the store ----
  {
    id: 'reconcile-requests-not-heard',
    guard:
      'A watcher beside the store (a process that exited, a cron that fired, a Deployment edited by hand) gets its object reconciled while the controller runs.',
    file: 'src/reconcile/controller.ts',
    from: '    this.stopListening = this.options.requests?.subscribe((request) => this.onRequest(request));\n',
    to: '',
    tests: ['src/reconcile/controller.test.ts'],
  },
  {
    id: 'reconcile-requests-heard-after-stop',
    guard: "A stopped controller (a leader term that ended) stops listening to watchers' requests.",
    file: 'src/reconcile/controller.ts',
    from: '    this.stopListening?.();\n',
    to: '',
    tests: ['src/reconcile/controller.test.ts'],
  },
  {
    id: 'source-request-not-heard',
    guard:
      'A reconcile request for a GitSource (the kube store saw it deleting) reaches the GitSource reconciler.',
    file: 'src/reconcile/controller.ts',
    from: "    else if (request.kind === 'GitSource') this.sourceQueue.add(key);\n",
    to: '',
    tests: ['src/reconcile/controller.test.ts'],
  },
  {
    id: 'source-finalizer-released-before-prune',
    guard: "A deleted GitSource's finalizer is released only after everything it applied is pruned.",
    file: 'src/reconcile/gitsource/reconciler.ts',
    from: "  await deps.syncs.prune(namespace, name);\n  await deps.store.releaseFinalizer?.('GitSource', namespace, name);",
    to: "  await deps.store.releaseFinalizer?.('GitSource', namespace, name);\n  await deps.syncs.prune(namespace, name);",
    tests: ['src/reconcile/controller.test.ts'],
  },
  {
    id: 'source-deletion-not-requested',
    guard:
      "The kube store asks for a deleting GitSource's reconcile, whose finalizer prunes what it applied.",
    file: 'src/platform/kube/kube-store.ts',
    from: "    this.options.requests?.request(object.kind as 'GitSource' | 'Function', namespace, name);\n",
    to: '',
    tests: ['test/kube/store.test.ts'],
  },
  {
    id: 'function-deletion-not-requested',
    guard:
      "The kube store asks for a deleting Function's reconcile, whose finalizer removes its workload and builds before the Function goes.",
    file: 'src/platform/kube/kube-store.ts',
    from: "if (object.kind === 'GitSource' || object.kind === 'Function') this.requestFinalize(object);",
    to: "if (object.kind === 'GitSource') this.requestFinalize(object);",
    tests: ['test/kube/store.test.ts'],
  },
  {
    id: 'function-finalizer-skips-leftovers',
    guard:
      "A deleted Function's finalizer removes what owner references cannot reach: its build Jobs, contexts and images.",
    file: 'src/reconcile/function/reconciler.ts',
    from: '  await deps.leftovers?.remove(namespace, name);\n',
    to: '',
    tests: ['test/kube/build-gc.test.ts'],
  },
  {
    id: 'source-deletion-asked-once',
    guard:
      "The kube store asks again for a deleting GitSource's reconcile while its finalizer stays: the first request may reach no controller.",
    file: 'src/platform/kube/kube-store.ts',
    from: '      this.askingAgain.delete(key);\n      this.requestFinalize(object);\n',
    to: '      this.askingAgain.delete(key);\n',
    tests: ['test/kube/store.test.ts'],
  },
  {
    id: 'finalizer-released-from-live-object',
    guard: 'The kube store removes its finalizer only from an object being deleted, never from a live one.',
    file: 'src/platform/kube/kube-store.ts',
    from: 'if (!current || !isDeleting(current) || index < 0) return;',
    to: 'if (!current || index < 0) return;',
    tests: ['test/kube/store.test.ts'],
  },
  // ---- The kube data path never asks the API server ----
  {
    id: 'kube-route-reads-api-per-request',
    guard:
      "The kube /fn/ route reads only what the watches hold: the API server's own counter sees no read for 3,000 requests.",
    file: 'src/platform/kube/kube-store.ts',
    from: '    const object = this.seen.get(keyOf(kind, namespace, name));\n    return object && !isDeleting(object)',
    to: '    void this.get(kind, namespace, name).catch(() => undefined);\n    const object = this.seen.get(keyOf(kind, namespace, name));\n    return object && !isDeleting(object)',
    tests: ['test/kube/api-outage.test.ts'],
  },
  // ---- Preparations shared by deploys of one namespace ----
  {
    id: 'shared-run-hands-out-a-stale-run',
    guard:
      'A caller of a shared preparation never gets a run that began before it asked (an edited NetworkPolicy asked about after the edit is put back).',
    file: 'src/core/shared-next-run.ts',
    from: '    const current = this.running.get(key);\n    if (!current) return this.start(key, task);\n',
    to: '    const current = this.running.get(key);\n    if (!current) return this.start(key, task);\n    return current;\n',
    tests: ['src/core/shared-next-run.test.ts'],
  },
  {
    id: 'namespace-prepare-per-deploy',
    guard: 'Deploys of one namespace at once share its preparation: 30 at once cost two, not 30.',
    file: 'src/platform/kube/namespaces.ts',
    from: '    return this.preparing.run(namespace, () => this.prepareNow(namespace));\n',
    to: '    return this.prepareNow(namespace);\n',
    tests: ['test/kube/namespaces.test.ts'],
  },
  {
    id: 'autoscale-scale-in-past-panic-window',
    guard:
      'A scale-in goes only as far as the panic window agrees: leaving a panic at full load keeps the instances the last seconds used.',
    file: 'src/core/autoscale.ts',
    from: '  if (!panicking && desired < ready) desired = Math.max(desired, Math.min(wantPanic, ready));\n',
    to: '',
    tests: ['src/core/autoscale.test.ts'],
  },
  // ---- Balancing /fn/ over a function's endpoints ----
  {
    id: 'lb-pick-ignores-in-flight',
    guard:
      "Each request goes to the endpoint with the fewest of this proxy's requests in flight, not merely the next in turn.",
    file: 'src/proxy/least-in-flight.ts',
    from: '      if (count < fewest) {',
    to: '      if (fewest === Number.POSITIVE_INFINITY) {',
    tests: ['src/proxy/least-in-flight.test.ts'],
  },
  {
    id: 'lb-end-not-told',
    guard: "The proxy tells a request's end back to the endpoint picker, so counts in flight fall again.",
    file: 'src/proxy/function-proxy.ts',
    from: '    if (this.picked !== undefined) this.route?.endpoints?.release(this.picked);\n',
    to: '',
    tests: ['src/proxy/function-proxy.test.ts'],
  },
  {
    id: 'lb-not-ready-endpoint-picked',
    guard: 'An endpoint whose ready condition is false never gets a request.',
    file: 'src/platform/kube/endpoints.ts',
    from: 'return addressesOf(slices, (conditions) => conditions?.ready !== false, podAccepted);',
    to: 'return addressesOf(slices, () => true, podAccepted);',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'lb-terminating-endpoint-picked',
    guard: 'A terminating endpoint never gets a request, even with its ready condition left out.',
    file: 'src/platform/kube/endpoints.ts',
    from: 'if (!taken(conditions) || conditions?.terminating === true) continue;',
    to: 'if (!taken(conditions)) continue;',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'lb-main-thread-uses-service',
    guard:
      "The main thread's /fn/ balances an always-on function over its ready endpoints, not through its Service.",
    file: 'src/platform/kube/routes.ts',
    from: '          ...(endpoints ? { endpoints: this.pickers.of(objectKey(namespace, name), endpoints) } : {}),\n',
    to: '',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'lb-thread-uses-service',
    guard:
      "The gateway thread's /fn/ balances over the endpoints its mirrored route carries, as the main thread does.",
    file: 'src/server/gateway/worker.ts',
    from: '      ...(endpoints ? { endpoints: pickers.of(key, endpoints) } : {}),\n',
    to: '',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'lb-endpoint-change-not-published',
    guard: "An EndpointSlice change republishes the function's route to the gateway thread.",
    file: 'src/platform/kube/route-cache.ts',
    from: '    this.changed(slice.metadata.namespace, slice.metadata.labels?.[LABEL_FUNCTION]);\n',
    to: '',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'lb-serving-addresses-stale',
    guard:
      "A function's serving endpoints are read again once its EndpointSlices change: a removed endpoint gets nothing more.",
    file: 'src/platform/kube/route-cache.ts',
    from: '    this.servingByService.delete(key);\n',
    to: '',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'lb-rolling-revision-picked',
    guard:
      "Only endpoints whose pod runs the serving revision get requests: a rolling-out revision's ready pods get none before status names it serving.",
    file: 'src/platform/kube/route-cache.ts',
    from: 'const runs = (pod: string) => this.podRevisions.get(objectKey(namespace, pod)) === revision;',
    to: 'const runs = (_pod: string) => true;',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'lb-unnamed-endpoint-picked',
    guard: 'An endpoint that names no pod (so no revision) never gets a request.',
    file: 'src/platform/kube/endpoints.ts',
    from: 'if (pod === undefined || !podAccepted(pod)) continue;',
    to: 'if (pod !== undefined && !podAccepted(pod)) continue;',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'lb-pod-seen-not-published',
    guard:
      "A function pod first seen after its endpoint republishes the function's route, so the gateway thread starts using it.",
    file: 'src/platform/kube/route-cache.ts',
    from: '    this.servingByService.delete(service);\n    this.changed(namespace, fn);\n',
    to: '    this.servingByService.delete(service);\n',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'lb-pod-revision-stale',
    guard: "A function's serving endpoints are read again once one of its pods is first seen or gone.",
    file: 'src/platform/kube/route-cache.ts',
    from: '    this.servingByService.delete(service);\n',
    to: '',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  {
    id: 'lb-no-endpoint-no-fallback',
    guard:
      "A route whose picker has no endpoint (none known yet) sends to the route's own origin, the Service address.",
    file: 'src/proxy/function-proxy.ts',
    from: '    const origin = this.picked ?? route.origin;\n',
    to: '    const origin = this.picked as string;\n',
    tests: ['src/proxy/function-proxy.test.ts'],
  },
  {
    id: 'lb-mirror-ignores-endpoint-change',
    guard:
      'A route whose endpoints changed reaches the gateway thread: the mirror does not take it for the same route.',
    file: 'src/server/gateway/gateway.ts',
    from: '    a.activitySlot === b.activitySlot &&\n    sameList(a.endpoints, b.endpoints) &&\n',
    to: '    a.activitySlot === b.activitySlot &&\n',
    tests: ['test/kube/endpoint-balance.test.ts'],
  },
  // ---- How a serving sless stops ----
  {
    id: 'gateway-failure-exits-zero',
    guard:
      'A failed gateway thread ends the process with exit code 1, so a supervisor or the kubelet starts it again.',
    file: 'src/cli/stop-on-signals.ts',
    from: "shutdown('proxy thread failed', 1);",
    to: "shutdown('proxy thread failed');",
    tests: ['src/cli/stop-on-signals.test.ts'],
  },
  {
    id: 'stop-runs-twice',
    guard: 'A second signal during a stop does not start another stop.',
    file: 'src/cli/stop-on-signals.ts',
    from: '    if (stopping) return;\n',
    to: '',
    tests: ['src/cli/stop-on-signals.test.ts'],
  },
  // ---- Branch previews ----
  {
    id: 'preview-scope-main-sees-previews',
    guard:
      "An apply sees only its own scope's objects: the main branch's sync never prunes or rewrites a preview's Functions, nor a preview's sync main's.",
    file: 'src/reconcile/apply-plan.ts',
    from: 'for (const object of objects) if (inScope(object)) existing.set(refKey(refOf(object)), object);',
    to: 'for (const object of objects) existing.set(refKey(refOf(object)), object);',
    tests: ['src/reconcile/apply-plan.test.ts', 'test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'preview-scope-takeover',
    guard:
      "An object of the other scope in an apply's way (a repository Function bearing a preview's name, or the reverse) is an ownership conflict, never overwritten.",
    file: 'src/reconcile/apply-plan.ts',
    from: 'if (before && !inScope(before) && (owner !== undefined || preview !== undefined)) {',
    to: 'if (before && !inScope(before) && owner === "never") {',
    tests: ['src/reconcile/apply-plan.test.ts'],
  },
  {
    id: 'preview-prune-skipped',
    guard:
      "A branch deleted or no longer matching takes its preview's Functions (and so their processes) with it.",
    file: 'src/reconcile/preview-sync.ts',
    from: 'if (kept.has(fn.metadata.labels?.[LABEL_PREVIEW] as string)) continue;',
    to: 'continue;',
    tests: [
      'src/reconcile/preview-sync.test.ts',
      'test/platform/local.test.ts',
      'test/platform/kube.test.ts',
      'test/local/previews.test.ts',
    ],
  },
  {
    id: 'preview-list-failure-prunes',
    guard: 'A failure to list the branches prunes no preview: nothing is known of them until the next poll.',
    file: 'src/reconcile/preview-sync.ts',
    from: '      return result;\n    }\n    const main = branchOf(',
    to: '      branches = [];\n    }\n    const main = branchOf(',
    tests: ['src/reconcile/preview-sync.test.ts'],
  },
  {
    id: 'preview-collision-first-wins',
    guard:
      'Two branches that normalise to one label are both refused and named in status; neither takes the URL silently.',
    file: 'src/core/previews.ts',
    from: 'if (found.length === 1) previews.push(',
    to: 'if (found.length >= 1) previews.push(',
    tests: ['src/core/previews.test.ts', 'test/local/previews.test.ts'],
  },
  {
    id: 'preview-label-reads-as-commit',
    guard:
      'A branch label is never 12 or 40 hex digits, so `@{label}` and `@{commit}` never mean the same URL.',
    file: 'src/core/previews.ts',
    from: 'if (HEX_SHA.test(label)) label =',
    to: 'if (HEX_SHA.test(label) && label === "") label =',
    tests: ['src/core/previews.test.ts'],
  },
  {
    id: 'preview-route-kube-dropped',
    guard: "On kube, `/fn/{ns}/{name}@{label}` routes to the preview's workload, as on local.",
    file: 'src/platform/kube/routes.ts',
    from: "    if (ref?.kind === 'label') return this.resolvePreview(namespace, fnName, ref.label);\n",
    to: '',
    tests: ['test/platform/kube.test.ts'],
  },
  {
    id: 'preview-gc-drops-preview-build',
    guard:
      "Build garbage collection keeps the build a branch preview asks for among its main Function's builds, where the preview's builds are kept.",
    file: 'src/reconcile/build-gc.ts',
    from: '      if (kept && current) kept.add(current);\n',
    to: '',
    tests: ['src/reconcile/build-gc.test.ts'],
  },
  {
    id: 'preview-builds-not-shared',
    guard: 'A preview is built as its main Function, so code the same on a branch and on main is built once.',
    file: 'src/reconcile/function/reconciler.ts',
    from: '  const builtAs = buildOwnerOf(fn);',
    to: '  const builtAs = fn;',
    tests: ['test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'preview-quota-ignored',
    guard:
      "A preview's Functions count against the namespace function quota; a branch past it is refused and named in status.",
    file: 'src/reconcile/preview-sync.ts',
    from: 'held - mine + plan.functions.size > deps.maxFunctions',
    to: 'held - mine > deps.maxFunctions',
    tests: ['src/reconcile/preview-sync.test.ts'],
  },
  {
    id: 'preview-route-any-function',
    guard:
      '`/fn/{ns}/{name}@{label}` serves only a Function labelled as the preview of {name} for {label}, not any object bearing the derived name.',
    file: 'src/platform/local/routes.ts',
    from: 'if (isPreviewOf(await this.options.store.get(',
    to: 'if (!!(await this.options.store.get(',
    tests: ['test/local/previews.test.ts'],
  },
  {
    id: 'kube-commit-revision-never-idle',
    guard:
      'On kube, a commit revision idle for its time is deleted by the leader (also after a restart), so its build is no longer kept as serving and can be collected.',
    file: 'src/platform/kube/scaler.ts',
    from: 'if (!entry.busy && now - entry.lastActive >= idleMs)',
    to: 'if (!entry.busy && !fn)',
    tests: ['test/kube/commit-urls.test.ts'],
  },
  {
    id: 'kube-commit-pods-carry-function-label',
    guard:
      "On kube, a commit revision's pods never carry the function label, so the function's own Service never sends a plain call to an old commit.",
    file: 'src/platform/kube/commit-manifests.ts',
    from: 'spec.template.metadata.labels = { ...podLabels, ...selector };',
    to: 'spec.template.metadata.labels = { ...functionLabels(fn), ...selector };',
    tests: ['test/kube/commit-urls.test.ts'],
  },
  {
    id: 'kube-commit-revisions-uncapped',
    guard:
      'On kube, at most three commit revisions of a function run; the least recently used is deleted first.',
    file: 'src/platform/kube/scaler.ts',
    from: 'let over = entries.length - max;',
    to: 'let over = 0;',
    tests: ['test/kube/commit-urls.test.ts'],
  },
  {
    id: 'commit-status-counts-previews',
    guard:
      "A commit's status counts the main branch's Functions only: a preview at the same commit never holds it at pending or turns it into a failure.",
    file: 'src/commitstatus/decide.ts',
    from: '      fn.metadata.labels?.[LABEL_PREVIEW] === undefined &&\n',
    to: '',
    tests: ['src/commitstatus/decide.test.ts'],
  },
  {
    id: 'kube-commit-url-disabled-served',
    guard: 'On kube, a disabled function answers 503 at its commit URLs too, as on local.',
    file: 'src/platform/kube/commit-revisions.ts',
    from: "if (fn.status?.phase === 'Disabled') return",
    to: "if (fn.status?.phase === 'Disabled' && !fn) return",
    tests: ['test/kube/commit-urls.test.ts', 'test/platform/kube.test.ts'],
  },
  {
    id: 'kube-commit-room-not-made',
    guard:
      'On kube, room is made before a new commit revision starts, so calling many old commits at once never runs more than three of a function.',
    file: 'src/platform/kube/commit-revisions.ts',
    from: '    await scaler.makeRoomForCommit(namespace, name, commitDeploymentName(name, build.commit));\n',
    to: '',
    tests: ['test/kube/commit-urls.test.ts'],
  },
  // ---- The code security gate ----
  {
    id: 'code-gate-remembered-refusal-builds',
    guard:
      'Code the gate refused is never built: a refusal remembered from an earlier attempt (a rebuild request) refuses as a fresh one does.',
    file: 'src/gate/code-gate.ts',
    from: "    if (check.result === 'Refused') {",
    to: "    if (check.result === 'Refused' && verdict.startedAt >= attempt) {",
    tests: ['test/platform/local.test.ts', 'test/platform/kube.test.ts'],
  },
];
