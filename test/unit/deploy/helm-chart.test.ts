/**
 * deploy/helm/inference-platform rendered (test/support/helm-template.ts, since `helm` cannot be
 * installed here) with its default values and with every option on: each manifest valid against
 * the Kubernetes schemas (kubernetes-models), the server's container set up as the server reads
 * it (variables, ports, probes, command), the RBAC that of deploy/kubernetes/rbac.yaml, the
 * provider's settings accepted by the server's own parser. test/integration/helm-server.test.ts
 * starts the real server with the rendered container's command and environment.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { parseKubernetesConfig } from '../../../control-plane/providers/kubernetes/kubernetes-config';
import { loadGatewayConfig } from '../../../gateway/gateway-config';
import { loadFullControlPlaneConfig } from '../../../control-plane/full-config';
import { renderChart, type RenderedManifest } from '../../support/helm-template';
import { envNamesInCode, execForm, parseDockerfile, ROOT, stagesOf } from './dockerfile-lint';
import { ALL_ON_VALUES, CHART_DIR, containerEnv, serverContainer } from '../../support/helm-chart';

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment, 'v1/Service': Service, 'v1/Secret': Secret, 'v1/ConfigMap': ConfigMap, 'v1/ServiceAccount': ServiceAccount,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget, 'rbac.authorization.k8s.io/v1/Role': Role, 'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding, 'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
};

const release = { name: 'prod', namespace: 'ai' };
const defaults = renderChart(CHART_DIR, { release });
const allOn = renderChart(CHART_DIR, { release, values: ALL_ON_VALUES });
const kinds = (manifests: RenderedManifest[]) => manifests.map(({ object }) => `${object.kind}/${object.metadata.name}`).sort();
const find = (manifests: RenderedManifest[], kind: string) => manifests.filter(({ object }) => object.kind === kind).map(({ object }) => object);

describe.each([['default values', defaults], ['every option on', allOn]])('the chart with %s', (_, manifests) => {
  it('renders manifests valid against the Kubernetes schemas', () => {
    for (const { object } of manifests) {
      const Model = MODELS[`${object.apiVersion}/${object.kind}`];
      expect([object.kind, Boolean(Model)]).toEqual([object.kind, true]);
      expect(() => new Model(JSON.parse(JSON.stringify(object)) as never).validate()).not.toThrow();
    }
  });

  it('gives the server only variables it reads, with values it accepts', () => {
    const container = serverContainer(manifests);
    const names = envNamesInCode();
    const env = container.env as { name: string; value?: string }[];
    // POD_IP is there for CLUSTER_ADDRESS's $(POD_IP), expanded by the kubelet.
    const referenced = new Set(env.flatMap(({ value }) => [...(value ?? '').matchAll(/\$\((\w+)\)/g)].map((match) => match[1])));
    expect(env.map(({ name }) => name).filter((name) => !names.has(name) && !referenced.has(name))).toEqual([]);
    const secrets = find(manifests, 'Secret');
    for (const secret of secrets) expect(Object.keys(secret.stringData).filter((name) => !names.has(name))).toEqual([]);
    const resolved = containerEnv(manifests, { POD_IP: '10.0.0.7' });
    const gateway = loadGatewayConfig(resolved);
    const controlPlane = loadFullControlPlaneConfig(resolved);
    expect([gateway.host, controlPlane.grpcHost]).toEqual(['0.0.0.0', '0.0.0.0']);
    expect(controlPlane.clusterAddress).toBe(`10.0.0.7:${controlPlane.grpcPort}`);
    expect(container.ports).toEqual([{ name: 'http', containerPort: gateway.port }, { name: 'grpc', containerPort: controlPlane.grpcPort }]);
    const [service] = find(manifests, 'Service');
    expect(service.spec.ports.map((port: { port: number; targetPort: string }) => [port.port, port.targetPort])).toEqual([[gateway.port, 'http'], [controlPlane.grpcPort, 'grpc']]);
  });

  it('runs the image\'s command under its entrypoint, probing /readyz and /healthz', () => {
    const container = serverContainer(manifests);
    const image = stagesOf(parseDockerfile(fs.readFileSync(path.join(ROOT, 'deploy/docker/server.Dockerfile'), 'utf8'))).at(-1)!;
    expect(container.command).toBeUndefined(); // the image's ENTRYPOINT (tini) stays
    expect(container.args).toEqual(execForm(image.instructions.filter((i) => i.keyword === 'CMD').at(-1)!.args));
    expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(container.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
  });

  it('runs as the image\'s non-root user on a read-only root filesystem, with writable data and /tmp', () => {
    const [deployment] = find(manifests, 'Deployment');
    const pod = deployment.spec.template.spec;
    const container = serverContainer(manifests);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000 });
    expect(container.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    const env = containerEnv(manifests, { POD_IP: '10.0.0.7' });
    const mounts = container.volumeMounts.map((mount: { mountPath: string }) => mount.mountPath);
    expect(mounts).toEqual(expect.arrayContaining([env.DATA_DIR, '/tmp']));
    expect(container.resources.requests).toBeDefined();
    expect(pod.serviceAccountName).toBe(find(manifests, 'ServiceAccount')[0].metadata.name);
  });

  it('selects the same pods in the Deployment, the Service and the PodDisruptionBudget', () => {
    const [deployment] = find(manifests, 'Deployment');
    const [service] = find(manifests, 'Service');
    const [budget] = find(manifests, 'PodDisruptionBudget');
    expect(deployment.spec.selector.matchLabels).toEqual(service.spec.selector);
    expect(budget.spec.selector.matchLabels).toEqual(service.spec.selector);
    expect(deployment.spec.template.metadata.labels).toMatchObject(service.spec.selector);
  });
});

describe('the chart', () => {
  it('with default values: the server, its Service, ServiceAccount and disruption budget, on the embedded database', () => {
    expect(kinds(defaults)).toEqual([
      'Deployment/prod-inference-platform', 'PodDisruptionBudget/prod-inference-platform',
      'Service/prod-inference-platform', 'ServiceAccount/prod-inference-platform',
    ]);
    const env = containerEnv(defaults, { POD_IP: '10.0.0.7' });
    expect(env.DATABASE_URL).toBeUndefined();
    expect(env.KUBERNETES_CONFIG_FILE).toBeUndefined();
  });

  it('with every option on: external PostgreSQL and Redis (one by value, one by existing Secret), S3, keys, the provider', () => {
    expect(kinds(allOn)).toEqual([
      'ClusterRole/ai-prod-inference-platform', 'ClusterRoleBinding/ai-prod-inference-platform', 'ConfigMap/prod-inference-platform-kubernetes',
      'Deployment/prod-inference-platform', 'PodDisruptionBudget/prod-inference-platform', 'Role/prod-inference-platform', 'RoleBinding/prod-inference-platform',
      'Secret/prod-inference-platform', 'Secret/prod-inference-platform-keys', 'Service/prod-inference-platform', 'ServiceAccount/prod-inference-platform',
    ]);
    const container = serverContainer(allOn);
    const byName = Object.fromEntries((container.env as { name: string }[]).map((entry) => [entry.name, entry]));
    expect(byName.DATABASE_URL).toEqual({ name: 'DATABASE_URL', valueFrom: { secretKeyRef: { name: 'prod-inference-platform', key: 'DATABASE_URL' } } });
    expect(byName.REDIS_URL).toEqual({ name: 'REDIS_URL', valueFrom: { secretKeyRef: { name: 'redis-credentials', key: 'url' } } });
    expect(container.envFrom).toEqual([{ secretRef: { name: 'platform-keys' } }, { secretRef: { name: 'prod-inference-platform-keys' } }]);
    const env = containerEnv(allOn, { POD_IP: '10.0.0.7' });
    const controlPlane = loadFullControlPlaneConfig(env);
    expect(controlPlane.databaseUrl).toBe(ALL_ON_VALUES.database.url);
    expect(controlPlane.redisUrl).toBe('redis://redis:6379');
    expect(controlPlane.storage).toMatchObject({ storageProvider: 's3', s3Endpoint: 'http://minio.storage:9000', s3ForcePathStyle: true, s3AccessKeyId: 'AKIA-test' });
    expect(controlPlane.operatorToken).toBe(ALL_ON_VALUES.secrets.values.OPERATOR_TOKEN);
    expect(loadGatewayConfig(env)).toMatchObject({ publicUrl: 'https://inference.example.com', requestTimeoutMs: 90_000, metricsToken: 'a-metrics-token-of-16+' });
    expect(controlPlane.localAgents).toBe(false);
    const [deployment] = find(allOn, 'Deployment');
    expect(deployment.spec.replicas).toBe(3);
  });

  it('grants the Kubernetes provider exactly the rules of deploy/kubernetes/rbac.yaml, in its namespace, to the server\'s ServiceAccount', () => {
    const reference = parseAllDocuments(fs.readFileSync(path.join(ROOT, 'deploy/kubernetes/rbac.yaml'), 'utf8')).map((document) => document.toJS());
    const rules = (manifests: Record<string, any>[], kind: string) => manifests.find((object) => object.kind === kind)!.rules;
    const objects = allOn.map(({ object }) => object);
    expect(rules(objects, 'Role')).toEqual(rules(reference, 'Role'));
    expect(rules(objects, 'ClusterRole')).toEqual(rules(reference, 'ClusterRole'));
    const [role] = find(allOn, 'Role');
    expect(role.metadata.namespace).toBe('gpu-replicas');
    const serviceAccount = find(allOn, 'ServiceAccount')[0];
    for (const binding of [...find(allOn, 'RoleBinding'), ...find(allOn, 'ClusterRoleBinding')]) {
      expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: serviceAccount.metadata.name, namespace: 'ai' }]);
    }
    expect(find(allOn, 'RoleBinding')[0].roleRef.name).toBe(role.metadata.name);
    expect(find(allOn, 'ClusterRoleBinding')[0].roleRef.name).toBe(find(allOn, 'ClusterRole')[0].metadata.name);
  });

  it('writes the provider\'s settings as the server parses them, pointing its pods at the chart\'s Service', () => {
    const [configMap] = find(allOn, 'ConfigMap');
    const config = parseKubernetesConfig(configMap.data['kubernetes.yaml'], 'the chart');
    expect(config).toMatchObject({
      namespace: 'gpu-replicas', kubeconfig: 'in-cluster',
      controlPlaneGrpcAddress: 'prod-inference-platform.ai.svc:50051', controlPlaneHttpUrl: 'http://prod-inference-platform.ai.svc:8080',
      gpuClasses: [{ product: 'NVIDIA-L4', gpuMemoryGb: 24, pricePerGpuHour: 0.8 }],
    });
    const container = serverContainer(allOn);
    const env = containerEnv(allOn, { POD_IP: '10.0.0.7' });
    const mount = container.volumeMounts.find((entry: { name: string }) => entry.name === 'kubernetes-config');
    expect(path.join(mount.mountPath, 'kubernetes.yaml')).toBe(env.KUBERNETES_CONFIG_FILE);
    // The example's keys (but the ones the chart writes itself) pass through kubernetes.config.
    const example = fs.readFileSync(path.join(ROOT, 'deploy/kubernetes/values.example.yaml'), 'utf8');
    const exampleConfig = parseAllDocuments(example)[0].toJS() as Record<string, unknown>;
    for (const key of ['namespace', 'kubeconfig', 'controlPlaneGrpcAddress', 'controlPlaneHttpUrl']) delete exampleConfig[key];
    const withExample = renderChart(CHART_DIR, { release, values: { kubernetes: { enabled: true, config: exampleConfig } } });
    expect(() => parseKubernetesConfig(find(withExample, 'ConfigMap')[0].data['kubernetes.yaml'])).not.toThrow();
  });
});
