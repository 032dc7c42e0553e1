import { execFileSync } from 'node:child_process';
import path from 'node:path';

const ROOT = path.join(__dirname, '../..');

/**
 * The official Kubernetes client costs a server ~0.7 s at start-up and ~27 MiB of heap: only a
 * server with KUBERNETES_CONFIG_FILE loads it (control-plane/capacity/start-capacity.ts). Checked
 * on the built server (npm test builds it first), in a process of its own.
 */
test('loading the whole server (gateway and control plane) does not load @kubernetes/client-node', () => {
  const script = `
    require(${JSON.stringify(path.join(ROOT, 'dist/gateway/app.js'))});
    require(${JSON.stringify(path.join(ROOT, 'dist/control-plane/main.js'))});
    const loaded = Object.keys(require.cache).filter((file) => file.includes('@kubernetes'));
    process.stdout.write(JSON.stringify({ modules: Object.keys(require.cache).length, kubernetes: loaded.length }));`;
  const result = JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8' })) as { modules: number; kubernetes: number };
  // The server's own modules did load (the check would pass vacuously otherwise).
  expect(result.modules).toBeGreaterThan(500);
  expect(result.kubernetes).toBe(0);
});
