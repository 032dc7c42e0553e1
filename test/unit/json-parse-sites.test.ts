import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
const FOLDERS = ['control-plane', 'gateway', 'worker-agent', 'common'];

/**
 * Every JSON.parse in the server's and the agent's code that does not go through
 * common/json-nesting.ts's parseJsonText, with why its text cannot come from a tenant (nor
 * from an engine answering one). A new one fails this test: parse tenant text with
 * parseJsonText (the nesting scan runs first), or add it here with the reason it is trusted.
 */
const TRUSTED: Record<string, string> = {
  'common/json-nesting.ts': 'parseJsonText itself, after the scan',
  'common/agent-binary.ts': "the agent's own package.json",
  'common/json-spans.ts': 'one JSON string token (a member name): a string cannot nest',
  'gateway/http/json-top-level.ts': 'one JSON string token: a string cannot nest',
  'control-plane/catalog/catalog.ts': "the operator's catalog file",
  'control-plane/providers/kubernetes/kubernetes-provider.ts': "the Kubernetes API server's error body",
  'control-plane/storage/local-object-store.ts': 'the content-type sidecar the store itself wrote',
  'control-plane/cluster/event-bridge.ts': "a peer server's NOTIFY payload (replica load it rendered itself)",
  'control-plane/adapters/adapter-store.ts': "a peer server's NOTIFY payload (a deleted adapter's row it rendered itself)",
  'worker-agent/packaging/embedded-modules.ts': "the agent binary's own manifest",
  'worker-agent/packaging/build-agent.ts': 'package files read when the agent binary is built',
  'worker-agent/engines/model-rename.ts': "one JSON string token (the engine's model value, checked to start with a quote): a string cannot nest",
  'worker-agent/gpu-inventory.ts': "the host's GPU list (nvidia-smi or the operator's WORKER_GPUS)",
  'control-plane/database/data-dir-lock.ts': 'the lock file a server of this machine wrote in DATA_DIR',
  'gateway/server-cli.ts': "the platform's own package.json",
};

function sourceFiles(folder: string): string[] {
  const found: string[] = [];
  for (const entry of fs.readdirSync(path.join(ROOT, folder), { withFileTypes: true })) {
    const relative = path.posix.join(folder, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules' && entry.name !== 'generated') found.push(...sourceFiles(relative));
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') && !entry.name.endsWith('.d.ts')) {
      found.push(relative);
    }
  }
  return found;
}

/** Lines that call JSON.parse, comments left out. */
function parseCalls(file: string): string[] {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '');
  return text.split('\n').map((line) => line.replace(/\/\/.*$/, '')).filter((line) => /\bJSON\s*\.\s*parse\b|JSON\s*\[\s*['"]parse/.test(line));
}

describe('JSON.parse of tenant text goes through the nesting scan', () => {
  it('finds JSON.parse only where the text is trusted', () => {
    const unscanned = FOLDERS.flatMap(sourceFiles).filter((file) => parseCalls(file).length > 0 && !(file in TRUSTED));
    expect(unscanned).toEqual([]);
  });

  it('lists no file that no longer parses JSON (the list stays the list of real sites)', () => {
    const stale = Object.keys(TRUSTED).filter((file) => !fs.existsSync(path.join(ROOT, file)) || parseCalls(file).length === 0);
    expect(stale).toEqual([]);
  });
});
