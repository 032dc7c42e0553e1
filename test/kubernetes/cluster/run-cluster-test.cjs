#!/usr/bin/env node
/**
 * `npm run test:k8s`: the Kubernetes provider's end-to-end test against a real cluster, the one
 * KUBECONFIG names. Without KUBECONFIG it says so and exits 0 (`npm test` runs the same path
 * against an in-process fake API server).
 *
 * What the cluster needs (kind, k3s, or a GPU cluster):
 * - a namespace (K8S_NAMESPACE, default `inference-test`) with deploy/kubernetes/rbac.yaml
 *   applied (its namespace edited), and a KUBECONFIG whose user has those rights;
 * - nodes labelled `nvidia.com/gpu.product=<K8S_GPU_PRODUCT>` (default `TEST-GPU`) advertising
 *   `nvidia.com/gpu`. Without GPUs, fake both on a kind or k3s node:
 *     kubectl label node <node> nvidia.com/gpu.product=TEST-GPU
 *     kubectl proxy &   # then add the extended resource to the node's status:
 *     curl -s -X PATCH -H 'Content-Type: application/json-patch+json' \
 *       --data '[{"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"4"}]' \
 *       http://127.0.0.1:8001/api/v1/nodes/<node>/status
 * - pods able to reach this machine: K8S_CONTROL_PLANE_HOST (an address of this machine the
 *   pods can reach: with kind on Docker, the host's address on the `kind` network, e.g.
 *   172.18.0.1), and K8S_GRPC_PORT / K8S_HTTP_PORT free here (defaults 50551 / 18080).
 * - K8S_ENGINE_IMAGE: an image with glibc and `sh` (default `debian:bookworm-slim`). Unless
 *   K8S_REAL_ENGINE=true, the engine container only sleeps and the agent answers with its CPU
 *   stand-in (WORKER_ENGINE=cpu), so no GPU is used; with it, the catalog's vLLM image runs on
 *   real GPUs.
 */
const { spawnSync } = require('node:child_process');
const path = require('node:path');

if (!process.env.KUBECONFIG) {
  console.log('test:k8s skipped: KUBECONFIG is not set. Point it at a cluster (kind, k3s or a GPU cluster) to run the Kubernetes provider end to end; see test/kubernetes/cluster/run-cluster-test.cjs and docs/kubernetes.md.');
  process.exit(0);
}
const root = path.resolve(__dirname, '..', '..', '..');
const run = (command, args) => spawnSync(command, args, { cwd: root, stdio: 'inherit', env: process.env }).status ?? 1;
let status = run('npm', ['run', 'build']);
if (status === 0) status = run('node', ['dist/worker-agent/packaging/build-agent.js']);
if (status === 0) status = run('npx', ['jest', '-c', 'jest.k8s.config.js', '--runInBand']);
process.exit(status);
