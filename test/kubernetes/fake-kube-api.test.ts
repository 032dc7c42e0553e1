/**
 * The fake Kubernetes API server, scheduler and kubelet the provider's tests run against,
 * checked through the official client (CoreV1Api, Watch, informers) and a real kubeconfig file
 * over plain HTTP: that they answer as a real cluster does — objects, errors as Status objects,
 * watches from a resource version (410 once too old), optimistic concurrency, the garbage
 * collector, auth and RBAC; the scheduler's placements and messages; the kubelet's init
 * container, image pulls, environment, processes, restarts, logs and graceful deletion.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ApiException, CoreV1Api, KubeConfig, makeInformer, Watch, type V1Pod, type V1PolicyRule } from '@kubernetes/client-node';
import { FakeKubeApi, notGranted } from './support/fake-kube-api';
import { TestKubelet } from './support/test-kubelet';

const NAMESPACE = 'inference';
const TOKEN = 'test-token';
const H100 = 'NVIDIA-H100-80GB-HBM3';
const GPU_TAINT = { key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' };

async function waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 15));
  }
}

/** The Status object an ApiException carries. */
function statusOf(error: unknown): { code: number; reason?: string; message?: string } {
  if (!(error instanceof ApiException)) throw error;
  return { code: error.code, ...(typeof error.body === 'string' && error.body ? JSON.parse(error.body) as object : {}) };
}

async function failure(call: Promise<unknown>): Promise<{ code: number; reason?: string; message?: string }> {
  try {
    await call;
  } catch (error) {
    return statusOf(error);
  }
  throw new Error('the call succeeded');
}

/** Watch events through the client's Watch, as `type name phase`. */
function watchPods(kubeConfig: KubeConfig, query: Record<string, string>) {
  const events: Array<{ type: string; object: V1Pod & { code?: number; reason?: string } }> = [];
  let ended = false;
  const started = new Watch(kubeConfig).watch(`/api/v1/namespaces/${NAMESPACE}/pods`, query, (type, object: V1Pod & { code?: number; reason?: string }) => {
    events.push({ type, object });
  }, () => {
    ended = true;
  });
  return { events, ended: () => ended, stop: async () => (await started).abort() };
}

function pod(name: string, overrides: { labels?: Record<string, string>; gpus?: number; nodeSelector?: Record<string, string>; ownerUid?: string; ownerName?: string } = {}): V1Pod {
  const gpus = { 'nvidia.com/gpu': String(overrides.gpus ?? 1) };
  return {
    apiVersion: 'v1', kind: 'Pod',
    metadata: {
      name, labels: { 'app.kubernetes.io/managed-by': 'inference-platform', ...overrides.labels },
      ...(overrides.ownerUid ? { ownerReferences: [{ apiVersion: 'v1', kind: 'Secret', name: overrides.ownerName!, uid: overrides.ownerUid, blockOwnerDeletion: true }] } : {}),
    },
    spec: {
      restartPolicy: 'Always', nodeSelector: overrides.nodeSelector ?? { 'nvidia.com/gpu.product': H100 },
      tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
      containers: [{ name: 'engine', image: 'vllm/vllm-openai:v0.11.0', resources: { limits: gpus, requests: gpus } }],
    },
  };
}

describe('the fake API server through the official client', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fake-kube-test-'));
  let api: FakeKubeApi;
  let kubeConfig: KubeConfig;
  let core: CoreV1Api;

  beforeAll(async () => {
    api = new FakeKubeApi({ token: TOKEN, gcDelayMs: 5 });
    await api.start();
    api.addNode({ name: 'gpu-a', labels: { 'nvidia.com/gpu.product': H100 }, allocatable: { 'nvidia.com/gpu': '8', cpu: '64', memory: '512Gi' }, taints: [GPU_TAINT] });
    api.addNode({ name: 'cpu-a', allocatable: { cpu: '16', memory: '64Gi' } });
    // A kubeconfig file, loaded as a process loads one (plain http: see writeKubeconfig).
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(api.writeKubeconfig(path.join(dir, 'kubeconfig'), NAMESPACE));
    core = kubeConfig.makeApiClient(CoreV1Api);
  });

  afterAll(async () => {
    await api.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('the kubeconfig names the server, the token and the namespace; nodes list by label with their GPUs and taints', async () => {
    expect(kubeConfig.getCurrentCluster()?.server).toBe(api.url);
    expect(kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace).toBe(NAMESPACE);
    const nodes = await core.listNode({ labelSelector: 'nvidia.com/gpu.product' });
    expect(nodes.items.map((node) => node.metadata?.name)).toEqual(['gpu-a']);
    const [node] = nodes.items;
    expect(node.status?.allocatable?.['nvidia.com/gpu']).toBe('8');
    expect(node.status?.capacity?.['nvidia.com/gpu']).toBe('8');
    expect(node.spec?.taints).toEqual([GPU_TAINT]);
    expect(Number(nodes.metadata?.resourceVersion)).toBeGreaterThan(0);
    expect((await core.readNode({ name: 'cpu-a' })).metadata?.labels?.['kubernetes.io/hostname']).toBe('cpu-a');
    expect(await failure(core.readNode({ name: 'nope' }))).toMatchObject({ code: 404, kind: 'Status', status: 'Failure', reason: 'NotFound', message: 'nodes "nope" not found' });
  });

  test('pods: create (defaults filled in), get, list by label and field, conflicts and validation in the real words, delete at once without a kubelet', async () => {
    const created = await core.createNamespacedPod({ namespace: NAMESPACE, body: pod('web-1', { labels: { tier: 'a' } }) });
    expect(created.metadata).toMatchObject({ name: 'web-1', namespace: NAMESPACE });
    expect(created.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.metadata?.creationTimestamp).toBeInstanceOf(Date);
    expect(created.status?.phase).toBe('Pending');
    expect(created.spec).toMatchObject({ terminationGracePeriodSeconds: 30, schedulerName: 'default-scheduler', dnsPolicy: 'ClusterFirst' });
    expect(created.spec?.tolerations).toContainEqual({ key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 });
    await core.createNamespacedPod({ namespace: NAMESPACE, body: pod('web-2', { labels: { tier: 'b' } }) });

    expect((await core.readNamespacedPod({ name: 'web-1', namespace: NAMESPACE })).metadata?.uid).toBe(created.metadata?.uid);
    const names = async (query: { labelSelector?: string; fieldSelector?: string }) => (await core.listNamespacedPod({ namespace: NAMESPACE, ...query })).items.map((item) => item.metadata?.name);
    expect(await names({ labelSelector: 'tier=a' })).toEqual(['web-1']);
    expect(await names({ labelSelector: 'tier in (a,b),app.kubernetes.io/managed-by=inference-platform' })).toEqual(['web-1', 'web-2']);
    expect(await names({ labelSelector: 'tier!=a' })).toEqual(['web-2']);
    expect(await names({ fieldSelector: 'metadata.name=web-2' })).toEqual(['web-2']);
    expect(await names({ fieldSelector: 'spec.nodeName=' })).toEqual(['web-1', 'web-2']);
    const everywhere = await core.listPodForAllNamespaces({ fieldSelector: 'status.phase!=Succeeded,status.phase!=Failed' });
    expect(everywhere.items).toHaveLength(2);
    expect(await failure(core.listPodForAllNamespaces({ fieldSelector: 'spec.containers=x' }))).toMatchObject({ code: 400, reason: 'BadRequest', message: 'field label not supported: spec.containers' });

    expect(await failure(core.createNamespacedPod({ namespace: NAMESPACE, body: pod('web-1') }))).toMatchObject({ code: 409, reason: 'AlreadyExists', message: 'pods "web-1" already exists' });
    const invalid = await failure(core.createNamespacedPod({ namespace: NAMESPACE, body: pod('rep_Y') }));
    expect(invalid).toMatchObject({ code: 422, reason: 'Invalid' });
    expect(invalid.message).toMatch(/^Pod "rep_Y" is invalid: metadata.name: Invalid value: "rep_Y": a lowercase RFC 1123 subdomain/);
    expect(await failure(core.readNamespacedPod({ name: 'nope', namespace: NAMESPACE }))).toMatchObject({ code: 404, reason: 'NotFound', message: 'pods "nope" not found' });

    // No kubelet attached: nothing runs the pod, so it goes at once (the API answers with the pod).
    const deleted = await core.deleteNamespacedPod({ name: 'web-1', namespace: NAMESPACE, gracePeriodSeconds: 10 });
    expect(deleted.metadata?.name).toBe('web-1');
    expect(await names({})).toEqual(['web-2']);
    await core.deleteNamespacedPod({ name: 'web-2', namespace: NAMESPACE });
  });

  test('a watch from a resource version sees ADDED, MODIFIED and DELETED in order, and an informer follows the same', async () => {
    const informed: string[] = [];
    const informer = makeInformer<V1Pod>(kubeConfig, `/api/v1/namespaces/${NAMESPACE}/pods`, () => core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: 'watched=yes' }), 'watched=yes');
    informer.on('add', (object) => informed.push(`add ${object.metadata?.name}`));
    informer.on('update', (object) => informed.push(`update ${object.metadata?.name} ${object.status?.phase}`));
    informer.on('delete', (object) => informed.push(`delete ${object.metadata?.name}`));
    await informer.start();

    const { metadata } = await core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: 'watched=yes' });
    const watch = watchPods(kubeConfig, { resourceVersion: metadata!.resourceVersion!, labelSelector: 'watched=yes' });
    await core.createNamespacedPod({ namespace: NAMESPACE, body: pod('watched-1', { labels: { watched: 'yes' } }) });
    await core.createNamespacedPod({ namespace: NAMESPACE, body: pod('unwatched', { labels: { watched: 'no' } }) });
    api.updatePodStatus(NAMESPACE, 'watched-1', { phase: 'Running' });
    await core.deleteNamespacedPod({ name: 'watched-1', namespace: NAMESPACE });
    await waitFor('three watch events', () => watch.events.length >= 3);
    expect(watch.events.map((event) => `${event.type} ${event.object.metadata?.name} ${event.object.status?.phase}`)).toEqual(['ADDED watched-1 Pending', 'MODIFIED watched-1 Running', 'DELETED watched-1 Running']);
    const versions = watch.events.map((event) => Number(event.object.metadata?.resourceVersion));
    expect([...versions].sort((a, b) => a - b)).toEqual(versions);
    await waitFor('the informer', () => informed.length >= 3);
    expect(informed).toEqual(['add watched-1', 'update watched-1 Running', 'delete watched-1']);

    // A label change moves an object into or out of a selector's view: ADDED / DELETED, as on a real server.
    api.updatePod(NAMESPACE, 'unwatched', (target) => {
      target.metadata!.labels!.watched = 'yes';
    });
    await waitFor('the relabelled pod', () => watch.events.length >= 4);
    expect(watch.events[3]).toMatchObject({ type: 'ADDED', object: { metadata: { name: 'unwatched' } } });
    await watch.stop();
    await informer.stop();
    // `watch=1` as well, read raw: newline-delimited JSON, ADDED for what exists when no resourceVersion is given.
    const raw = new AbortController();
    const response = await fetch(`${api.url}/api/v1/namespaces/${NAMESPACE}/pods?watch=1&labelSelector=watched%3Dyes`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: raw.signal });
    const reader = response.body!.getReader();
    const { value } = await reader.read();
    raw.abort();
    expect(JSON.parse(new TextDecoder().decode(value).split('\n')[0])).toMatchObject({ type: 'ADDED', object: { kind: 'Pod', metadata: { name: 'unwatched' } } });
    await core.deleteNamespacedPod({ name: 'unwatched', namespace: NAMESPACE });
  });

  test('a watch from a resource version older than the history answers ERROR 410 Expired, as after compaction', async () => {
    const small = new FakeKubeApi({ token: TOKEN, historyLimit: 3 });
    await small.start();
    try {
      const config = small.kubeConfig(NAMESPACE);
      const client = config.makeApiClient(CoreV1Api);
      const first = await client.createNamespacedPod({ namespace: NAMESPACE, body: pod('p-0') });
      for (let index = 1; index <= 5; index++) await client.createNamespacedPod({ namespace: NAMESPACE, body: pod(`p-${index}`) });
      const watch = watchPods(config, { resourceVersion: first.metadata!.resourceVersion! });
      await waitFor('the watch to end', () => watch.ended());
      expect(watch.events).toHaveLength(1);
      expect(watch.events[0].type).toBe('ERROR');
      expect(watch.events[0].object).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'Expired', code: 410 });
      // Recent enough: replayed.
      const recent = watchPods(config, { resourceVersion: String(Number(small.resourceVersion) - 2) });
      await waitFor('the replay', () => recent.events.length >= 2);
      expect(recent.events.map((event) => event.object.metadata?.name)).toEqual(['p-4', 'p-5']);
      await recent.stop();
    } finally {
      await small.close();
    }
  });

  test('secrets: stringData stored as data, replace with a stale resourceVersion is 409 Conflict', async () => {
    const created = await core.createNamespacedSecret({ namespace: NAMESPACE, body: { metadata: { name: 'tokens' }, stringData: { rep_y: 'join-1' } } });
    expect(created.data).toEqual({ rep_y: Buffer.from('join-1').toString('base64') });
    expect(created.stringData).toBeUndefined();
    expect(created.type).toBe('Opaque');
    const replaced = await core.replaceNamespacedSecret({ name: 'tokens', namespace: NAMESPACE, body: { metadata: { name: 'tokens', resourceVersion: created.metadata!.resourceVersion }, stringData: { rep_y: 'join-1', rep_z: 'join-2' } } });
    expect(Object.keys(replaced.data ?? {})).toEqual(['rep_y', 'rep_z']);
    expect(replaced.metadata?.uid).toBe(created.metadata?.uid);
    const stale = await failure(core.replaceNamespacedSecret({ name: 'tokens', namespace: NAMESPACE, body: { metadata: { name: 'tokens', resourceVersion: created.metadata!.resourceVersion }, stringData: {} } }));
    expect(stale).toMatchObject({ code: 409, reason: 'Conflict', message: 'Operation cannot be fulfilled on secrets "tokens": the object has been modified; please apply your changes to the latest version and try again' });
    expect(await failure(core.replaceNamespacedSecret({ name: 'absent', namespace: NAMESPACE, body: { metadata: { name: 'absent' } } }))).toMatchObject({ code: 404 });
    const gone = await core.deleteNamespacedSecret({ name: 'tokens', namespace: NAMESPACE });
    expect(gone).toMatchObject({ kind: 'Status', status: 'Success', details: { name: 'tokens', kind: 'secrets' } });
  });

  test('the garbage collector: deleting an owner Secret deletes its pods; a pod whose owner does not exist goes too', async () => {
    const secret = await core.createNamespacedSecret({ namespace: NAMESPACE, body: { metadata: { name: 'owner' }, stringData: { a: 'b' } } });
    await core.createNamespacedPod({ namespace: NAMESPACE, body: pod('owned-1', { ownerUid: secret.metadata!.uid, ownerName: 'owner' }) });
    await core.createNamespacedPod({ namespace: NAMESPACE, body: pod('owned-2', { ownerUid: secret.metadata!.uid, ownerName: 'owner' }) });
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(api.pods(NAMESPACE).map((item) => item.metadata?.name)).toEqual(['owned-1', 'owned-2']);
    await core.deleteNamespacedSecret({ name: 'owner', namespace: NAMESPACE, propagationPolicy: 'Background' });
    await waitFor('the dependents deleted', () => api.pods(NAMESPACE).length === 0);

    // Foreground: the owner waits (deletion timestamp, finalizer) until its blocking dependents are gone.
    const foreground = await core.createNamespacedSecret({ namespace: NAMESPACE, body: { metadata: { name: 'owner-fg' }, stringData: { a: 'b' } } });
    await core.createNamespacedPod({ namespace: NAMESPACE, body: pod('owned-3', { ownerUid: foreground.metadata!.uid, ownerName: 'owner-fg' }) });
    const seen: string[] = [];
    const stopListening = api.on('secret', (type, secret) => seen.push(`${type} ${secret.metadata?.finalizers?.join() ?? ''}`));
    const podSeen: string[] = [];
    const stopPods = api.on('pod', (type, target) => podSeen.push(`${type} ${target.metadata?.name}`));
    await core.deleteNamespacedSecret({ name: 'owner-fg', namespace: NAMESPACE, propagationPolicy: 'Foreground' });
    await waitFor('owner and dependent gone', () => api.pods(NAMESPACE).length === 0 && !api.secret(NAMESPACE, 'owner-fg'));
    stopListening();
    stopPods();
    expect(seen).toEqual(['MODIFIED foregroundDeletion', 'DELETED foregroundDeletion']);
    expect(podSeen).toEqual(['DELETED owned-3']);

    await core.createNamespacedPod({ namespace: NAMESPACE, body: pod('orphan', { ownerUid: '00000000-0000-4000-8000-000000000000', ownerName: 'never-was' }) });
    await waitFor('the pod with an absent owner collected', () => !api.pod(NAMESPACE, 'orphan'));
  });

  test('without the bearer token: 401 Unauthorized as a Status; every request is logged with the access it needed', async () => {
    const wrong = new KubeConfig();
    wrong.loadFromOptions({
      clusters: [{ name: 'fake', server: api.url, skipTLSVerify: true }], users: [{ name: 'someone', token: 'wrong' }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'someone' }], currentContext: 'fake',
    });
    expect(await failure(wrong.makeApiClient(CoreV1Api).listNode())).toMatchObject({ code: 401 });
    const bare = await fetch(`${api.url}/api/v1/nodes`);
    expect(bare.status).toBe(401);
    expect(await bare.json()).toEqual({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'Unauthorized', reason: 'Unauthorized', code: 401 });
    expect(await (await fetch(`${api.url}/apis/apps/v1/deployments`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()).toMatchObject({ kind: 'Status', code: 404, reason: 'NotFound' });

    expect(api.requests.find((request) => request.path === '/api/v1/nodes' && request.status === 401)).toBeDefined();
    expect(api.requests.some((request) => request.method === 'DELETE' && request.path === `/api/v1/namespaces/${NAMESPACE}/secrets/owner` && request.query.propagationPolicy === 'Background')).toBe(true);
    const access = api.access();
    expect(access).toContainEqual({ verb: 'list', resource: 'nodes', namespace: null });
    expect(access).toContainEqual({ verb: 'list', resource: 'pods', namespace: null });
    expect(access).toContainEqual({ verb: 'watch', resource: 'pods', namespace: NAMESPACE });
    expect(access).toContainEqual({ verb: 'update', resource: 'secrets', namespace: NAMESPACE });
    // Held against a Role and ClusterRole: what they miss is named.
    const role: V1PolicyRule[] = [
      { apiGroups: [''], resources: ['pods'], verbs: ['create', 'get', 'list', 'watch', 'delete'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'get', 'list', 'update', 'delete'] },
    ];
    const clusterRole: V1PolicyRule[] = [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] }];
    expect(notGranted(access, { roleNamespace: NAMESPACE, roleRules: role, clusterRoleRules: clusterRole })).toEqual([{ verb: 'list', resource: 'pods', namespace: null }]);
  });

  test('with RBAC rules given, a request they do not allow is 403 Forbidden in the authorizer\'s words', async () => {
    const guarded = new FakeKubeApi({
      token: TOKEN,
      rbac: { user: 'system:serviceaccount:inference:control-plane', roleNamespace: NAMESPACE, roleRules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] }] },
    });
    await guarded.start();
    try {
      const client = guarded.kubeConfig(NAMESPACE).makeApiClient(CoreV1Api);
      expect((await client.listNamespacedPod({ namespace: NAMESPACE })).items).toEqual([]);
      expect(await failure(client.listNode())).toMatchObject({
        code: 403, reason: 'Forbidden', message: 'nodes is forbidden: User "system:serviceaccount:inference:control-plane" cannot list resource "nodes" in API group "" at the cluster scope',
      });
      expect(await failure(client.deleteNamespacedPod({ name: 'x', namespace: NAMESPACE }))).toMatchObject({
        code: 403, message: 'pods "x" is forbidden: User "system:serviceaccount:inference:control-plane" cannot delete resource "pods" in API group "" in the namespace "inference"',
      });
    } finally {
      await guarded.close();
    }
  });
});

// ---- the scheduler and the kubelet ----------------------------------------------------------

const SCRIPTS: Record<string, string> = {
  // Prints what the pod gave it, exits 0 on SIGTERM. The trap comes first and the first line
  // says it is set: a SIGTERM sent before the shell ran `trap` would kill it (a race under load).
  good: '#!/bin/sh\ntrap \'echo stopping; exit 0\' TERM\necho "started token=$WORKER_JOIN_TOKEN engine=$WORKER_ENGINE url=${WORKER_ENGINE_URL:-none} home=$HOME"\nwhile true; do sleep 0.05; done\n',
  crash: '#!/bin/sh\necho "fatal: WORKER_MAX_CONCURRENCY must be a positive integer" >&2\nexit 1\n',
  stubborn: '#!/bin/sh\ntrap \'echo ignoring TERM\' TERM\necho trapped\nwhile true; do sleep 0.05; done\n',
};

describe('the test kubelet and scheduler', () => {
  let api: FakeKubeApi;
  let kubelet: TestKubelet;
  let core: CoreV1Api;
  let agentServer: http.Server;
  let agentBase: string;
  const started: number[] = [];

  const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

  /** The provider's pod shape (see the contract in docs/kubernetes.md). */
  function replicaPod(name: string, options: { script?: string; sha?: string; gpus?: number; image?: string; secret?: string; tolerate?: boolean; grace?: number; messagePolicy?: string } = {}): V1Pod {
    const script = options.script ?? 'good';
    const gpus = { 'nvidia.com/gpu': String(options.gpus ?? 1) };
    const image = options.image ?? 'vllm/vllm-openai:v0.11.0';
    return {
      apiVersion: 'v1', kind: 'Pod',
      metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'inference-platform', 'inference-platform/replica-id': name } },
      spec: {
        restartPolicy: 'Always', terminationGracePeriodSeconds: options.grace ?? 60,
        nodeSelector: { 'nvidia.com/gpu.product': H100 },
        tolerations: options.tolerate === false ? [] : [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
        volumes: [{ name: 'agent-bin', emptyDir: {} }, { name: 'dshm', emptyDir: { medium: 'Memory' } }],
        initContainers: [{
          name: 'fetch-agent', image: 'curlimages/curl:8.11.1', command: ['sh', '-c', 'curl … && sha256sum -c -'],
          env: [{ name: 'AGENT_URL', value: `${agentBase}/agent/${script}` }, { name: 'AGENT_SHA256', value: options.sha ?? sha256(SCRIPTS[script] ?? '') }, { name: 'AGENT_FILE', value: '/agent/worker-agent' }],
          volumeMounts: [{ name: 'agent-bin', mountPath: '/agent' }],
        }],
        containers: [
          { name: 'engine', image, args: ['--model', 'x'], resources: { limits: gpus, requests: gpus }, volumeMounts: [{ name: 'dshm', mountPath: '/dev/shm' }] },
          {
            name: 'agent', image, command: ['/agent/worker-agent'], ...(options.messagePolicy ? { terminationMessagePolicy: options.messagePolicy } : {}),
            env: [
              { name: 'WORKER_CONTROL_PLANE', value: '127.0.0.1:50051' },
              { name: 'WORKER_JOIN_TOKEN', valueFrom: { secretKeyRef: { name: options.secret ?? 'tokens', key: name } } },
              { name: 'WORKER_ENGINE', value: 'openai' },
              { name: 'WORKER_ENGINE_URL', value: 'http://127.0.0.1:8000/v1' },
            ],
            volumeMounts: [{ name: 'agent-bin', mountPath: '/agent', readOnly: true }],
          },
        ],
      },
    };
  }

  const livePod = (name: string) => api.pod(NAMESPACE, name);
  const agentStatus = (name: string) => livePod(name)?.status?.containerStatuses?.find((status) => status.name === 'agent');
  const eventsOf = async (name: string) => (await core.listNamespacedEvent({ namespace: NAMESPACE, fieldSelector: `involvedObject.name=${name},involvedObject.kind=Pod` })).items;
  const running = (name: string) => waitFor(`${name} running`, () => livePod(name)?.status?.phase === 'Running' && agentStatus(name)?.state?.running && livePod(name));
  /** Waits until the pod's agent has printed `line` (the scripts print their first line once their TERM trap is set). */
  const printed = (name: string, line: string) => waitFor(`${name} printed ${line}`, async () =>
    (await core.readNamespacedPodLog({ name, namespace: NAMESPACE, container: 'agent' })).includes(line));
  const track = (name: string) => {
    const pid = kubelet.processOf(name)?.pid;
    if (pid) started.push(pid);
    return pid;
  };
  async function deleteAndWait(name: string): Promise<void> {
    await core.deleteNamespacedPod({ name, namespace: NAMESPACE }).catch(() => undefined);
    await waitFor(`${name} gone`, () => !livePod(name));
  }

  beforeAll(async () => {
    agentServer = http.createServer((request, response) => {
      const script = SCRIPTS[(request.url ?? '').replace('/agent/', '')];
      if (!script) return void response.writeHead(404).end('not found');
      response.writeHead(200, { 'content-type': 'application/octet-stream' }).end(script);
    });
    await new Promise<void>((resolve) => agentServer.listen(0, '127.0.0.1', resolve));
    agentBase = `http://127.0.0.1:${(agentServer.address() as AddressInfo).port}`;
    api = new FakeKubeApi({ token: TOKEN });
    await api.start();
    api.addNode({ name: 'gpu-a', labels: { 'nvidia.com/gpu.product': H100 }, allocatable: { 'nvidia.com/gpu': '2', cpu: '64', memory: '512Gi' }, taints: [GPU_TAINT] });
    api.addNode({ name: 'cpu-a', allocatable: { cpu: '16', memory: '64Gi' } });
    api.addNode({ name: 'l4-a', labels: { 'nvidia.com/gpu.product': 'NVIDIA-L4' }, allocatable: { 'nvidia.com/gpu': '1' } });
    kubelet = new TestKubelet(api, { agentEnvOverrides: { WORKER_ENGINE: 'cpu' }, graceScale: 0.1, restartBackoffMs: 40, maxRestartBackoffMs: 400 });
    kubelet.start();
    core = api.kubeConfig(NAMESPACE).makeApiClient(CoreV1Api);
    await core.createNamespacedSecret({ namespace: NAMESPACE, body: { metadata: { name: 'tokens' }, stringData: { 'run-1': 'join-token-1', 'grace-1': 'g', 'crash-1': 'c', 'crash-2': 'c', 'kill-1': 'k', 'fits-1': 'f', 'waits-1': 'w' } } });
  });

  afterAll(async () => {
    await kubelet?.stop();
    await api?.close();
    await new Promise((resolve) => agentServer?.close(resolve));
    // Nothing the kubelet started outlives it.
    for (const pid of started) expect(() => process.kill(pid, 0)).toThrow();
  });

  test('a pod runs: the init container fetches and checks the agent, the agent runs with its resolved environment, status and events as a kubelet writes them', async () => {
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('run-1') });
    const pod = await running('run-1');
    track('run-1');
    expect(pod.spec?.nodeName).toBe('gpu-a');
    expect(pod.status).toMatchObject({ phase: 'Running', podIP: '127.0.0.1', hostIP: '127.0.0.1' });
    expect(pod.status?.conditions?.map((condition) => `${condition.type}=${condition.status}`)).toEqual(expect.arrayContaining(['PodScheduled=True', 'Initialized=True', 'Ready=True', 'ContainersReady=True']));
    expect(pod.status?.initContainerStatuses?.[0]).toMatchObject({ name: 'fetch-agent', ready: true, state: { terminated: { exitCode: 0, reason: 'Completed' } } });
    const engine = pod.status?.containerStatuses?.find((status) => status.name === 'engine');
    expect(engine).toMatchObject({ ready: true, restartCount: 0, state: { running: {} } });
    expect(agentStatus('run-1')).toMatchObject({ ready: true, restartCount: 0, started: true });
    expect(agentStatus('run-1')?.state?.running?.startedAt).toEqual(expect.any(String));

    // The token came from the Secret, the override replaced the engine, WORKER_ENGINE_URL was dropped, HOME is this machine's.
    const log = await waitFor('the agent\'s output', async () => {
      const text = await core.readNamespacedPodLog({ name: 'run-1', namespace: NAMESPACE, container: 'agent' });
      return text.includes('started') && text;
    });
    expect(log).toBe(`started token=join-token-1 engine=cpu url=none home=${os.homedir()}\n`);
    expect(await core.readNamespacedPodLog({ name: 'run-1', namespace: NAMESPACE, container: 'fetch-agent' })).toBe('/agent/worker-agent: OK\n');
    expect(await failure(core.readNamespacedPodLog({ name: 'run-1', namespace: NAMESPACE }))).toMatchObject({
      code: 400, message: 'a container name must be specified for pod run-1, choose one of: [engine agent] or one of the init containers: [fetch-agent]',
    });

    const reasons = (await eventsOf('run-1')).map((event) => `${event.reason}${event.involvedObject.fieldPath ? ` ${event.involvedObject.fieldPath}` : ''}`);
    expect(reasons).toEqual(expect.arrayContaining(['Scheduled', 'Pulling spec.initContainers{fetch-agent}', 'Started spec.initContainers{fetch-agent}', 'Started spec.containers{engine}', 'Started spec.containers{agent}']));
    const scheduled = (await eventsOf('run-1')).find((event) => event.reason === 'Scheduled');
    expect(scheduled).toMatchObject({ message: `Successfully assigned ${NAMESPACE}/run-1 to gpu-a`, source: { component: 'default-scheduler' } });
  });

  test('the scheduler: GPUs taken by bound pods, the real scheduler\'s message while nothing fits, bound once a pod goes or a node comes', async () => {
    // run-1 holds 1 of gpu-a's 2 GPUs: a 2-GPU pod fits nowhere.
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('waits-1', { gpus: 2 }) });
    const message = '0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn\'t match Pod\'s node affinity/selector. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.';
    const condition = await waitFor('unschedulable', () => livePod('waits-1')?.status?.conditions?.find((candidate) => candidate.type === 'PodScheduled' && candidate.status === 'False'));
    expect(condition).toMatchObject({ reason: 'Unschedulable', message });
    expect(livePod('waits-1')?.status?.phase).toBe('Pending');
    expect((await eventsOf('waits-1')).find((event) => event.reason === 'FailedScheduling')).toMatchObject({ type: 'Warning', message });

    // Without the toleration, the taint is the reason (it is checked before the selector, as the real filters run).
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('untolerated', { tolerate: false }) });
    const tainted = await waitFor('untolerated', () => livePod('untolerated')?.status?.conditions?.find((candidate) => candidate.type === 'PodScheduled')?.message);
    expect(tainted).toBe('0/3 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, 2 node(s) didn\'t match Pod\'s node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.');
    await deleteAndWait('untolerated');

    // run-1 goes: its GPU is free, the waiting pod is bound.
    await deleteAndWait('run-1');
    await running('waits-1');
    track('waits-1');
    expect(livePod('waits-1')?.spec?.nodeName).toBe('gpu-a');

    // A node comes: the next pod goes there.
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('fits-1') });
    await waitFor('fits-1 unschedulable', () => livePod('fits-1')?.status?.conditions?.some((candidate) => candidate.reason === 'Unschedulable'));
    api.addNode({ name: 'gpu-b', labels: { 'nvidia.com/gpu.product': H100 }, allocatable: { 'nvidia.com/gpu': '8' }, taints: [GPU_TAINT] });
    await running('fits-1');
    track('fits-1');
    expect(livePod('fits-1')?.spec?.nodeName).toBe('gpu-b');
    await deleteAndWait('waits-1');
    await deleteAndWait('fits-1');
  });

  test('deletion: Killing, SIGTERM to the agent, the pod gone once it exited; one that ignores SIGTERM is SIGKILLed after the (scaled) grace period', async () => {
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('grace-1') });
    await running('grace-1');
    await printed('grace-1', 'started');
    const child = kubelet.processOf('grace-1')!;
    track('grace-1');
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const watch = watchPods(api.kubeConfig(NAMESPACE), { resourceVersion: api.resourceVersion, fieldSelector: 'metadata.name=grace-1' });
    const deleting = await core.deleteNamespacedPod({ name: 'grace-1', namespace: NAMESPACE, gracePeriodSeconds: 30 });
    expect(deleting.metadata?.deletionTimestamp).toBeInstanceOf(Date);
    expect(deleting.metadata?.deletionGracePeriodSeconds).toBe(30);
    expect(await exit).toBe(0);
    await waitFor('DELETED', () => watch.events.some((event) => event.type === 'DELETED'));
    expect(watch.events.find((event) => event.object.metadata?.deletionTimestamp)).toMatchObject({ type: 'MODIFIED', object: { metadata: { deletionGracePeriodSeconds: 30 } } });
    expect(watch.events.at(-1)?.object.status?.phase).toBe('Succeeded');
    await watch.stop();
    expect(livePod('grace-1')).toBeUndefined();
    expect(api.events(NAMESPACE).some((event) => event.involvedObject.name === 'grace-1' && event.reason === 'Killing' && event.message === 'Stopping container agent')).toBe(true);

    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('stubborn-1', { script: 'stubborn', secret: 'stubborn' }) });
    await core.createNamespacedSecret({ namespace: NAMESPACE, body: { metadata: { name: 'stubborn' }, stringData: { 'stubborn-1': 's' } } });
    await running('stubborn-1');
    await printed('stubborn-1', 'trapped');
    const stubborn = kubelet.processOf('stubborn-1')!;
    track('stubborn-1');
    const killed = new Promise<string | null>((resolve) => stubborn.once('exit', (_code, signal) => resolve(signal)));
    const before = Date.now();
    // The grace period in DeleteOptions (the body) rather than the query; it overrides the pod's 60 s.
    const deleting2 = await core.deleteNamespacedPod({ name: 'stubborn-1', namespace: NAMESPACE, body: { gracePeriodSeconds: 2 } });
    expect(deleting2.metadata?.deletionGracePeriodSeconds).toBe(2);
    expect(await killed).toBe('SIGKILL');
    // 2 s of grace at a scale of 0.1.
    expect(Date.now() - before).toBeGreaterThanOrEqual(150);
    // Short of the pod's own 60 s grace (6 s at this scale), with room for a loaded machine.
    expect(Date.now() - before).toBeLessThan(5_000);
    await waitFor('stubborn-1 gone', () => !livePod('stubborn-1'));
  });

  test('a missing Secret or key is CreateContainerConfigError until it appears', async () => {
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('config-1', { secret: 'later' }) });
    const waiting = await waitFor('config error', () => agentStatus('config-1')?.state?.waiting?.reason === 'CreateContainerConfigError' && agentStatus('config-1'));
    expect(waiting.state?.waiting?.message).toBe('secret "later" not found');
    await core.createNamespacedSecret({ namespace: NAMESPACE, body: { metadata: { name: 'later' }, stringData: { other: 'x' } } });
    await waitFor('missing key', () => agentStatus('config-1')?.state?.waiting?.message === `couldn't find key config-1 in Secret ${NAMESPACE}/later`);
    expect(livePod('config-1')?.status?.phase).toBe('Pending');
    const secret = await core.readNamespacedSecret({ name: 'later', namespace: NAMESPACE });
    await core.replaceNamespacedSecret({ name: 'later', namespace: NAMESPACE, body: { ...secret, stringData: { 'config-1': 'now' } } });
    await running('config-1');
    track('config-1');
    await deleteAndWait('config-1');
  });

  test('an agent whose SHA-256 does not match: the init container fails (exit 1, sha256sum\'s words) and backs off', async () => {
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('sha-1', { sha: 'a'.repeat(64) }) });
    const init = await waitFor('init crash loop', () => {
      const status = livePod('sha-1')?.status?.initContainerStatuses?.[0];
      return status?.state?.waiting?.reason === 'CrashLoopBackOff' && status;
    });
    expect(init.lastState?.terminated).toMatchObject({ exitCode: 1, reason: 'Error' });
    expect(init.state?.waiting?.message).toMatch(/^back-off 10s restarting failed container=fetch-agent pod=sha-1_inference\(/);
    expect(init.restartCount).toBeGreaterThanOrEqual(1);
    expect(livePod('sha-1')?.status?.phase).toBe('Pending');
    expect(livePod('sha-1')?.status?.conditions?.find((condition) => condition.type === 'Initialized')).toMatchObject({ status: 'False', reason: 'ContainersNotInitialized', message: 'containers with incomplete status: [fetch-agent]' });
    expect(await core.readNamespacedPodLog({ name: 'sha-1', namespace: NAMESPACE, container: 'fetch-agent', previous: true })).toBe('/agent/worker-agent: FAILED\nsha256sum: WARNING: 1 computed checksum did NOT match\n');

    // A download that fails: curl's exit code and words.
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('download-1', { script: 'missing' }) });
    const download = await waitFor('download failure', () => {
      const status = livePod('download-1')?.status?.initContainerStatuses?.[0];
      return (status?.lastState?.terminated ?? status?.state?.terminated) && status;
    });
    expect((download.lastState?.terminated ?? download.state?.terminated)?.exitCode).toBe(22);
    await deleteAndWait('sha-1');
    await deleteAndWait('download-1');
  });

  test('an image that cannot be pulled: ErrImagePull, then ImagePullBackOff, the pod Pending, Failed events', async () => {
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('pull-1', { image: 'vllm/vllm-openai:does-not-exist' }) });
    const first = await waitFor('ErrImagePull', () => livePod('pull-1')?.status?.containerStatuses?.find((status) => status.state?.waiting?.reason === 'ErrImagePull'));
    expect(first.state?.waiting?.message).toBe('rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/vllm/vllm-openai:does-not-exist": failed to resolve reference "docker.io/vllm/vllm-openai:does-not-exist": docker.io/vllm/vllm-openai:does-not-exist: not found');
    const backoff = await waitFor('ImagePullBackOff', () => livePod('pull-1')?.status?.containerStatuses?.find((status) => status.state?.waiting?.reason === 'ImagePullBackOff'));
    expect(backoff.state?.waiting?.message).toMatch(/^Back-off pulling image "vllm\/vllm-openai:does-not-exist": ErrImagePull: /);
    expect(livePod('pull-1')?.status?.phase).toBe('Pending');
    const failed = (await eventsOf('pull-1')).filter((event) => event.reason === 'Failed').map((event) => event.message);
    expect(failed).toEqual(expect.arrayContaining(['Error: ErrImagePull', expect.stringMatching(/^Failed to pull image "vllm\/vllm-openai:does-not-exist": rpc error/)]));

    // An image the test makes fail, then lets through.
    kubelet.failImagePull('vllm/vllm-openai:v0.11.1');
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('pull-2', { image: 'vllm/vllm-openai:v0.11.1', secret: 'pull' }) });
    await core.createNamespacedSecret({ namespace: NAMESPACE, body: { metadata: { name: 'pull' }, stringData: { 'pull-2': 'p' } } });
    await waitFor('pull-2 failing', () => livePod('pull-2')?.status?.containerStatuses?.some((status) => status.state?.waiting?.reason === 'ErrImagePull'));
    kubelet.failImagePull(null);
    await running('pull-2');
    track('pull-2');
    await deleteAndWait('pull-1');
    await deleteAndWait('pull-2');
  });

  test('an agent that exits at once: restarted with a doubling back-off, CrashLoopBackOff with the kubelet\'s message; its output in the message only with FallbackToLogsOnError', async () => {
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('crash-1', { script: 'crash', messagePolicy: 'FallbackToLogsOnError' }) });
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('crash-2', { script: 'crash' }) });
    const looping = (name: string) => waitFor(`${name} crash-looping`, () => agentStatus(name)?.state?.waiting?.reason === 'CrashLoopBackOff' && (agentStatus(name)?.restartCount ?? 0) >= 2 && agentStatus(name));
    const status = await looping('crash-1');
    expect(status.state?.waiting?.message).toMatch(new RegExp(`^back-off (\\d+m)?\\d+s restarting failed container=agent pod=crash-1_${NAMESPACE}\\(${livePod('crash-1')?.metadata?.uid}\\)$`));
    expect(status.lastState?.terminated).toMatchObject({ exitCode: 1, reason: 'Error', message: 'fatal: WORKER_MAX_CONCURRENCY must be a positive integer' });
    expect(status.ready).toBe(false);
    // Every container started once: Running, though not Ready (as `kubectl get pod` shows a crash loop).
    expect(livePod('crash-1')?.status?.phase).toBe('Running');
    expect(livePod('crash-1')?.status?.conditions?.find((condition) => condition.type === 'Ready')).toMatchObject({ status: 'False', reason: 'ContainersNotReady', message: 'containers with unready status: [agent]' });
    expect((await eventsOf('crash-1')).some((event) => event.reason === 'BackOff' && event.message?.startsWith('Back-off restarting failed container agent in pod crash-1_'))).toBe(true);
    expect(await core.readNamespacedPodLog({ name: 'crash-1', namespace: NAMESPACE, container: 'agent', previous: true })).toBe('fatal: WORKER_MAX_CONCURRENCY must be a positive integer\n');
    // The default terminationMessagePolicy (File) leaves the message empty, as a real kubelet does.
    const quiet = await looping('crash-2');
    expect(quiet.lastState?.terminated).toMatchObject({ exitCode: 1, reason: 'Error' });
    expect(quiet.lastState?.terminated?.message).toBeUndefined();
    await deleteAndWait('crash-1');
    await deleteAndWait('crash-2');
  });

  test('an agent killed behind the kubelet\'s back is restarted (restartCount 1, lastState the kill)', async () => {
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('kill-1') });
    await running('kill-1');
    const first = kubelet.processOf('kill-1')!;
    track('kill-1');
    first.kill('SIGKILL');
    const restarted = await waitFor('the restart', () => (agentStatus('kill-1')?.restartCount === 1 && agentStatus('kill-1')?.state?.running) ? agentStatus('kill-1') : undefined);
    expect(restarted?.lastState?.terminated).toMatchObject({ exitCode: 137, reason: 'Error', signal: 9 });
    expect(kubelet.processOf('kill-1')?.pid).not.toBe(first.pid);
    track('kill-1');
    await deleteAndWait('kill-1');
  });

  test('a node removed: its pods fail and are deleted by the pod garbage collector, their processes killed', async () => {
    api.addNode({ name: 'gpu-c', labels: { 'nvidia.com/gpu.product': H100, pool: 'c' }, allocatable: { 'nvidia.com/gpu': '1' } });
    for (const name of ['gpu-a', 'gpu-b']) {
      api.updateNode(name, (node) => {
        node.spec = { ...node.spec, unschedulable: true };
      });
    }
    await core.createNamespacedSecret({ namespace: NAMESPACE, body: { metadata: { name: 'node-gone' }, stringData: { 'node-1': 'n' } } });
    await core.createNamespacedPod({ namespace: NAMESPACE, body: replicaPod('node-1', { secret: 'node-gone' }) });
    await running('node-1');
    expect(livePod('node-1')?.spec?.nodeName).toBe('gpu-c');
    const child = kubelet.processOf('node-1')!;
    track('node-1');
    const exit = new Promise((resolve) => child.once('exit', resolve));
    api.removeNode('gpu-c');
    expect(livePod('node-1')).toBeUndefined();
    await exit;
  });
});
