/** What the kube system is made of, loaded side by side: the Kubernetes client's parts and the API's. */
export async function loadKubeModules() {
  const [
    auth,
    historyModule,
    gitHttpModule,
    workloadsModule,
    builds,
    secrets,
    leaderWork,
    dataPath,
    loop,
    api,
    asyncWork,
  ] = await Promise.all([
    import('../../api/auth/factory.js'),
    import('../../api/build-history.js'),
    import('../../source/guarded-http.js'),
    import('../../platform/kube/workloads.js'),
    import('../../platform/kube/wire/builds.js'),
    import('../../platform/kube/wire/secrets.js'),
    import('../../platform/kube/wire/leader-work.js'),
    import('../../platform/kube/wire/data-path.js'),
    import('./control-loop.js'),
    import('./api.js'),
    import('./async.js'),
  ]);
  return {
    ...auth,
    ...historyModule,
    ...gitHttpModule,
    ...workloadsModule,
    ...builds,
    ...secrets,
    ...leaderWork,
    ...dataPath,
    ...loop,
    ...api,
    ...asyncWork,
  };
}
