// A real single-node cluster for the e2e suite: the control plane of fixture.ts (S3 and registry bound
// to the pod bridge's gateway address, so pods reach them), plus containerd + runc, the CNI bridge,
// kubelet, kube-proxy (iptables), kube-controller-manager and kube-scheduler.
//
//   const node = await startTestNode();
//   ... node.kubeConfig, node.registryHost, node.images.node ...
//   await node.stop();
//
// Needs root. Host changes (bridge, iptables chains, mounts, cgroups, sysctls) are undone by
// node-janitor.sh, which starts first, holds a machine-wide lock (one test node at a time) and puts the
// machine back when stop() is called or the owning process disappears, even by SIGKILL.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KubeConfig } from '@kubernetes/client-node';
import {
  type ApiServerControl,
  freePort,
  httpsGet,
  logTail,
  note,
  type Proc,
  runBuildScript,
  startProcess,
  startTestCluster,
  type TestCluster,
  type TestClusterInfo,
  waitFor,
} from './fixture.ts';
import { HOST_TMPDIR_KEY } from './run-temp.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const JANITOR = join(HERE, 'node-janitor.sh');

/** Fixed names: the machine-wide lock allows one test node at a time. */
export const NODE_NAME = 'sless-test-node';
export const BRIDGE = 'sless0';
export const CGROUP_ROOT = 'sless-test-node';
export const POD_CIDR = '10.254.77.0/24';
/** The machine-wide lock node-janitor.sh holds for the node's whole life. */
export const NODE_LOCK = '/run/lock/sless-test-node.lock';
export const GATEWAY_IP = '10.254.77.1';

export interface TestNodeInfo extends TestClusterInfo {
  nodeName: string;
  /** The host's address on the pod bridge; S3 and the registry listen here. */
  gatewayIp: string;
  /** host:port of the registry as pods and kaniko address it. */
  registryHost: string;
  /** Full references of the images pushed into the registry at start. */
  /** kubectl of the cluster's version (built by build.sh); pass it `--kubeconfig kubeconfigPath`. */
  kubectl: string;
  images: { node: string; python: string; kaniko: string; pause: string } & Partial<
    Record<ExtraImage, string>
  >;
  /**
   * kaniko's registry map (`SLESS_KANIKO_REGISTRY_MAP` entries) sending the images' origins to the
   * test registry, which holds every base image of the node.
   */
  registryMap: string[];
  /** The cluster DNS server (CoreDNS on the host, on the bridge address), with `extras` only. */
  clusterDns?: string;
  /** The node's temp dir (containerd root, kubelet root, logs). */
  root: string;
}

export interface TestNode extends TestNodeInfo {
  kubeConfig: KubeConfig;
  /**
   * Pushes the bases deploy/Dockerfile builds from (its Node image and its sops stage's golang) under
   * their Docker Hub names, on demand (only the controller image needs them), and returns their
   * references in the registry.
   */
  pushControllerBases(): Promise<{ node: string; golang: string }>;
  /**
   * The node's kube-apiserver alone, for outage tests: every node is its caller's own (the machine
   * lock allows one at a time, and no file shares it), so killing it breaks no other file's tests.
   * The kubelet, kube-proxy, controller-manager and scheduler keep running and reconnect to the
   * restarted one at the same address.
   */
  apiServer: ApiServerControl;
  /** Stops the node and the control plane and restores the machine. Idempotent. */
  stop(): Promise<void>;
}

/** The host's guard for the service range (see where the node starts kube-proxy). */
const SERVICE_GUARD = 'KUBE-SLESS-SERVICE-GUARD';

function run(cmd: string, args: string[]): string {
  const res = spawnSync(cmd, args, { encoding: 'utf8' });
  if (res.error) throw new Error(`${cmd} could not run: ${res.error.message}`);
  if (res.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${res.status}):\n${res.stderr}`);
  return res.stdout;
}

interface Janitor {
  pid: number;
  exited: Promise<void>;
}

/** Starts the janitor and resolves once it holds the lock and recorded the machine's state. */
async function startJanitor(root: string, kubeProxy: string): Promise<Janitor> {
  const child = spawn(
    'bash',
    [JANITOR, String(process.pid), root, BRIDGE, CGROUP_ROOT, kubeProxy],
    // Its own process group, so that nothing aimed at the node's servers reaches it; stderr goes to
    // the test's output so a teardown problem is visible.
    {
      detached: true,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, SLESS_NODE_LOCK: NODE_LOCK },
    },
  );
  if (child.pid === undefined) throw new Error('could not start node-janitor.sh');
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout?.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      if (out.includes('READY')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`node-janitor.sh exited (${code}) before READY`)));
  });
  child.stdout?.destroy();
  child.unref();
  return { pid: child.pid, exited };
}

function cgroupMounts(): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f.includes('cgroup') || f.includes('cgroup2'))
    .map((f) => f[4] ?? '')
    .filter((p) => p.startsWith('/sys/fs/cgroup/'));
}

/** The kubelet wants its cgroup root to exist; cpuset children start empty and must inherit. */
function createCgroupRoot(): void {
  for (const mount of cgroupMounts()) {
    const dir = join(mount, CGROUP_ROOT);
    mkdirSync(dir, { recursive: true });
    for (const f of ['cpuset.cpus', 'cpuset.mems']) {
      if (existsSync(join(mount, f))) writeFileSync(join(dir, f), readFileSync(join(mount, f), 'utf8'));
    }
  }
}

function checkSubnetFree(): void {
  const routes = run('ip', ['-4', 'route', 'show']);
  const prefix = POD_CIDR.split('.').slice(0, 3).join('.');
  if (routes.includes(`${prefix}.`))
    throw new Error(`the test node's pod subnet ${POD_CIDR} is already routed on this machine:\n${routes}`);
}

function containerdConfig(root: string, pauseImage: string): string {
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  return `version = 2
root = "${root}/containerd"
state = "${root}/containerd-state"
# Plugins that would write outside the root (opt creates /opt/containerd) or are not used.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "${root}/containerd.sock"
[ttrpc]
  address = "${root}/containerd.ttrpc.sock"
[metrics]
  address = ""

[${cri}]
  sandbox_image = "${pauseImage}"
  # The machine lacks CAP_SYS_RESOURCE: without this the pause container fails to start.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [${cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [${cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [${cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
        Root = "${root}/runc"
  [${cri}.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${root}/cni"
  [${cri}.registry]
    config_path = "${root}/certs.d"
`;
}

function cniConfig(root: string): string {
  return JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: 'sless-test',
      plugins: [
        {
          type: 'bridge',
          bridge: BRIDGE,
          isGateway: true,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: POD_CIDR, gateway: GATEWAY_IP }]],
            routes: [{ dst: '0.0.0.0/0' }],
            dataDir: join(root, 'cni-ipam'),
          },
        },
      ],
    },
    null,
    2,
  );
}

function kubeletConfig(
  root: string,
  caFile: string,
  port: number,
  healthzPort: number,
  clusterDns: string | undefined,
): string {
  const dns = clusterDns ? `clusterDNS: [${clusterDns}]\nclusterDomain: cluster.local\n` : '';
  return `${dns}apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${GATEWAY_IP}
port: ${port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: ${healthzPort}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: ${caFile}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: /${CGROUP_ROOT}
cgroupsPerQOS: true
containerRuntimeEndpoint: unix://${root}/containerd.sock
failSwapOn: false
failCgroupV1: false
podLogsDir: ${root}/pod-logs
serializeImagePulls: false
maxPods: 60
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`;
}

function kubeProxyConfig(kubeconfig: string, healthzPort: number, metricsPort: number): string {
  return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: ${kubeconfig}}
mode: iptables
hostnameOverride: ${NODE_NAME}
clusterCIDR: ${POD_CIDR}
healthzBindAddress: 127.0.0.1:${healthzPort}
metricsBindAddress: 127.0.0.1:${metricsPort}
# Leave the conntrack sysctls alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
`;
}

async function skopeoCopy(layout: string, tag: string, dest: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn(
      'skopeo',
      ['copy', '--quiet', '--dest-tls-verify=false', `oci:${layout}:${tag}`, `docker://${dest}`],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      err += c;
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`skopeo copy ${tag} -> ${dest} failed:\n${err}`)),
    );
  });
}

/** Images pushed only for a node started with `extras`: the Go runtime's bases and cron's curl. */
type ExtraImage = 'golang' | 'distroless' | 'curl';

interface NodeBinaries {
  KUBELET: string;
  KUBE_CONTROLLER_MANAGER: string;
  KUBE_SCHEDULER: string;
  KUBE_PROXY: string;
  NODE_IMAGES: string;
  KUBECTL: string;
  images: Record<'node' | 'python' | 'kaniko' | 'pause', string>;
  extras: {
    COREDNS: string;
    NODE_EXTRA_IMAGES: string;
    /** Tag in the layout = repository:tag in the registry, and the registry it stands in for. */
    images: Record<ExtraImage, { ref: string; origin: string }>;
    /** The controller image's bases (tags `*-controller` in the layout), by their Docker Hub names. */
    controllerBases: { node: string; golang: string };
  };
}

async function nodeBinaries(): Promise<NodeBinaries> {
  const { kv, stdout } = await runBuildScript();
  const need = (k: string): string => {
    const v = kv[k];
    if (!v)
      throw new Error(
        `test/cluster/build.sh did not report ${k} (is SLESS_NODE_TESTS=0 set?); output was:\n${stdout}`,
      );
    return v;
  };
  return {
    KUBELET: need('KUBELET'),
    KUBE_CONTROLLER_MANAGER: need('KUBE_CONTROLLER_MANAGER'),
    KUBE_SCHEDULER: need('KUBE_SCHEDULER'),
    KUBE_PROXY: need('KUBE_PROXY'),
    NODE_IMAGES: need('NODE_IMAGES'),
    KUBECTL: need('KUBECTL'),
    images: {
      node: need('NODE_IMAGE_NODE'),
      python: need('NODE_IMAGE_PYTHON'),
      kaniko: need('NODE_IMAGE_KANIKO'),
      pause: need('NODE_IMAGE_PAUSE'),
    },
    extras: {
      COREDNS: need('COREDNS'),
      NODE_EXTRA_IMAGES: need('NODE_EXTRA_IMAGES'),
      images: {
        golang: { ref: need('NODE_IMAGE_GOLANG'), origin: 'index.docker.io' },
        distroless: { ref: need('NODE_IMAGE_DISTROLESS'), origin: need('NODE_IMAGE_DISTROLESS_REGISTRY') },
        curl: { ref: need('NODE_IMAGE_CURL'), origin: 'index.docker.io' },
      },
      controllerBases: {
        node: need('NODE_IMAGE_CONTROLLER_NODE'),
        golang: need('NODE_IMAGE_CONTROLLER_GOLANG'),
      },
    },
  };
}

export interface NodeStartOptions {
  readyTimeoutMs?: number;
  /**
   * Cluster DNS (CoreDNS on the host, serving cluster.local from the apiserver, set as the kubelet's
   * clusterDNS) and the extra images (Go runtime bases, cron's curl). Off by default: the suites
   * that do not need them do not pay for them.
   */
  extras?: boolean;
}

/** CoreDNS as a cluster runs it: the kubernetes plugin over the apiserver, on the bridge address. */
function corefile(kubeconfig: string, readyPort: number): string {
  return `.:53 {
    bind ${GATEWAY_IP}
    errors
    ready 127.0.0.1:${readyPort}
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig ${kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
`;
}

export async function startTestNode(opts: NodeStartOptions = {}): Promise<TestNode> {
  if (process.getuid?.() !== 0)
    throw new Error('the test node (kubelet, containerd) needs root; run the e2e suite as root');
  const readyTimeoutMs = opts.readyTimeoutMs ?? 180_000;
  const bins = await nodeBinaries();
  const t0 = Date.now();
  // In the machine's own temporary directory, not the test run's: the janitor removes it, also after
  // the run is gone, and the node's socket paths stay short.
  const root = mkdtempSync(join(process.env[HOST_TMPDIR_KEY] ?? tmpdir(), 'sless-node-'));
  const janitor = await startJanitor(root, bins.KUBE_PROXY);
  note(`test node: janitor ${janitor.pid} holds the node lock (waited ${Date.now() - t0} ms)`);
  const procs: Proc[] = [];
  let cluster: TestCluster | undefined;
  let stopped: Promise<void> | undefined;

  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      const t = Date.now();
      // The janitor stops every node process and container, then restores the machine.
      try {
        process.kill(janitor.pid, 'SIGTERM');
      } catch {
        // already gone
      }
      await janitor.exited;
      await cluster?.stop();
      note(`test node stopped and machine restored in ${Date.now() - t} ms`);
    })();
    return stopped;
  };
  const recordPgid = (p: Proc): void => {
    procs.push(p);
    writeFileSync(join(root, 'janitor', 'pgids'), `${procs.map((q) => q.pid).join('\n')}\n`);
  };
  const start = (name: string, bin: string, args: string[], env?: Record<string, string>): Proc => {
    const p = startProcess(root, name, bin, args, root, { removeRootOnOrphan: false, env });
    recordPgid(p);
    return p;
  };

  try {
    checkSubnetFree();
    run('ip', ['link', 'add', BRIDGE, 'type', 'bridge']);
    run('ip', ['addr', 'add', `${GATEWAY_IP}/24`, 'dev', BRIDGE]);
    run('ip', ['link', 'set', BRIDGE, 'up']);
    createCgroupRoot();

    cluster = await startTestCluster({ serveHost: GATEWAY_IP, apiServerHost: GATEWAY_IP });
    const pki = join(dirname(cluster.kubeconfigPath), 'pki');
    const registryHost = cluster.registry.url.replace(/^https?:\/\//, '');
    const images = {
      node: `${registryHost}/${bins.images.node}`,
      python: `${registryHost}/${bins.images.python}`,
      kaniko: `${registryHost}/${bins.images.kaniko}`,
      pause: `${registryHost}/${bins.images.pause}`,
    };
    const registryMap = [`index.docker.io=${registryHost}`];
    const extraImages: Partial<Record<ExtraImage, string>> = {};
    const tPush = Date.now();
    const pushes = (Object.keys(images) as (keyof typeof images)[]).map((k) =>
      skopeoCopy(bins.NODE_IMAGES, k, images[k]),
    );
    if (opts.extras) {
      for (const [k, { ref, origin }] of Object.entries(bins.extras.images) as [
        ExtraImage,
        { ref: string; origin: string },
      ][]) {
        extraImages[k] = `${registryHost}/${ref}`;
        pushes.push(skopeoCopy(bins.extras.NODE_EXTRA_IMAGES, k, `${registryHost}/${ref}`));
        if (!registryMap.some((e) => e.startsWith(`${origin}=`)))
          registryMap.push(`${origin}=${registryHost}`);
      }
    }
    await Promise.all(pushes);
    note(`test node: images pushed to ${registryHost} in ${Date.now() - tPush} ms`);

    // containerd: its own root, state, sockets; pulls from the plain-HTTP test registry.
    mkdirSync(join(root, 'cni'));
    mkdirSync(join(root, 'certs.d', registryHost), { recursive: true });
    writeFileSync(
      join(root, 'certs.d', registryHost, 'hosts.toml'),
      `server = "http://${registryHost}"\n[host."http://${registryHost}"]\n  capabilities = ["pull", "resolve", "push"]\n  skip_verify = true\n`,
    );
    writeFileSync(join(root, 'cni', '10-sless-test.conflist'), cniConfig(root));
    writeFileSync(join(root, 'containerd.toml'), containerdConfig(root, images.pause));
    const containerd = start('containerd', '/usr/bin/containerd', [
      '--config',
      join(root, 'containerd.toml'),
      '--log-level',
      'warn',
    ]);
    await waitFor(containerd, 'containerd socket', readyTimeoutMs, async () =>
      existsSync(join(root, 'containerd.sock')),
    );

    const [kubeletPort, kubeletHealthz, proxyHealthz, proxyMetrics, kcmPort, schedPort, dnsReady] =
      await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort(), freePort(), freePort()]);
    let clusterDns: string | undefined;
    let coredns: Proc | undefined;
    if (opts.extras) {
      writeFileSync(join(root, 'Corefile'), corefile(cluster.kubeconfigPath, dnsReady));
      coredns = start('coredns', bins.extras.COREDNS, ['-conf', join(root, 'Corefile')]);
      clusterDns = GATEWAY_IP;
    }
    writeFileSync(
      join(root, 'kubelet.yaml'),
      kubeletConfig(root, join(pki, 'ca.crt'), kubeletPort, kubeletHealthz, clusterDns),
    );
    const kubelet = start(
      'kubelet',
      bins.KUBELET,
      [
        `--config=${join(root, 'kubelet.yaml')}`,
        `--kubeconfig=${cluster.kubeconfigPath}`,
        `--root-dir=${join(root, 'kubelet')}`,
        `--cert-dir=${join(root, 'kubelet', 'pki')}`,
        `--hostname-override=${NODE_NAME}`,
        `--node-ip=${GATEWAY_IP}`,
        '--v=1',
      ],
      { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' },
    );
    writeFileSync(
      join(root, 'kube-proxy.yaml'),
      kubeProxyConfig(cluster.kubeconfigPath, proxyHealthz, proxyMetrics),
    );
    // Here the default route leads to a transparent proxy that accepts any TCP connection. A
    // connection to a ClusterIP that kube-proxy had not programmed yet reached it, got a 404, and
    // stayed in /fn/'s keep-alive pool for good. Where the service range leads nowhere (as on any
    // cluster's network), such a connection fails and the next one is made once the rules are in:
    // the guard refuses the host's service traffic that kube-proxy did not DNAT. The janitor removes
    // it with the node's other KUBE- chains.
    run('iptables', ['-w', '-N', SERVICE_GUARD]);
    run('iptables', [
      '-w',
      '-A',
      SERVICE_GUARD,
      '-d',
      '10.0.0.0/24',
      '-m',
      'conntrack',
      '!',
      '--ctstate',
      'DNAT',
      '-j',
      'REJECT',
    ]);
    run('iptables', ['-w', '-I', 'OUTPUT', '-j', SERVICE_GUARD]);
    const kubeProxy = start('kube-proxy', bins.KUBE_PROXY, [
      `--config=${join(root, 'kube-proxy.yaml')}`,
      '--v=1',
    ]);
    const kcm = start('kube-controller-manager', bins.KUBE_CONTROLLER_MANAGER, [
      `--kubeconfig=${cluster.kubeconfigPath}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      `--secure-port=${kcmPort}`,
      `--service-account-private-key-file=${join(pki, 'sa.key')}`,
      `--root-ca-file=${join(pki, 'ca.crt')}`,
      '--use-service-account-credentials=false',
      '--v=1',
    ]);
    const scheduler = start('kube-scheduler', bins.KUBE_SCHEDULER, [
      `--kubeconfig=${cluster.kubeconfigPath}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      `--secure-port=${schedPort}`,
      '--v=1',
    ]);

    const api = (path: string) =>
      httpsGet(`${cluster?.apiServerUrl}${path}`, cluster?.caCert ?? '', cluster?.adminToken ?? '');
    await waitFor(kubelet, `node ${NODE_NAME} Ready`, readyTimeoutMs, async () => {
      for (const p of [kubeProxy, kcm, scheduler, containerd, ...(coredns ? [coredns] : [])])
        if (p.hasExited()) throw new Error(`${p.name} exited:\n${logTail(p)}`);
      const [status, body] = await api(`/api/v1/nodes/${NODE_NAME}`);
      if (status !== 200) return false;
      const node = JSON.parse(body) as {
        status?: { conditions?: { type: string; status: string }[] };
        spec?: { taints?: unknown[] };
      };
      const ready = node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
      return Boolean(ready) && (node.spec?.taints ?? []).length === 0;
    });
    // Pods need their namespace's default ServiceAccount (the controller-manager creates it).
    await waitFor(kcm, 'ServiceAccount default/default', readyTimeoutMs, async () => {
      const [status] = await api('/api/v1/namespaces/default/serviceaccounts/default');
      return status === 200;
    });

    if (coredns) {
      // Ready once its kubernetes plugin has synced Services from the apiserver.
      await waitFor(coredns, 'CoreDNS ready', readyTimeoutMs, async () => {
        const res = await fetch(`http://127.0.0.1:${dnsReady}/ready`).catch(() => undefined);
        return res?.status === 200;
      });
    }

    const { kubeConfig, stop: _clusterStop, apiServer, ...clusterInfo } = cluster;
    if (!apiServer) throw new Error('the test cluster of the node gave no API server control');
    note(
      `test node ready in ${Date.now() - t0} ms (${NODE_NAME}, pods ${POD_CIDR}, registry ${registryHost})`,
    );
    return {
      ...clusterInfo,
      kubeConfig,
      pushControllerBases: async () => {
        const { node, golang } = bins.extras.controllerBases;
        const refs = { node: `${registryHost}/${node}`, golang: `${registryHost}/${golang}` };
        await Promise.all([
          skopeoCopy(bins.extras.NODE_EXTRA_IMAGES, 'node-controller', refs.node),
          skopeoCopy(bins.extras.NODE_EXTRA_IMAGES, 'golang-controller', refs.golang),
        ]);
        return refs;
      },
      apiServer,
      nodeName: NODE_NAME,
      gatewayIp: GATEWAY_IP,
      registryHost,
      kubectl: bins.KUBECTL,
      images: { ...images, ...extraImages },
      registryMap,
      ...(clusterDns ? { clusterDns } : {}),
      root,
      stop,
    };
  } catch (e) {
    const detail = procs.map((p) => `--- ${p.name}\n${logTail(p, 8)}`).join('\n');
    await stop();
    throw new Error(`${e instanceof Error ? e.message : String(e)}\n${detail}`);
  }
}
