/**
 * The worker agent's single binary as the control plane hands it out (`npm run build:agent`
 * writes `dist/bin/worker-agent-linux-<arch>` and its `.sha256`): its versioned download path,
 * and its SHA-256, which a Kubernetes pod's init container checks before running it.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export const AGENT_ARCHES = ['x64', 'arm64'] as const;
export type AgentArch = (typeof AGENT_ARCHES)[number];

export function agentBinaryName(arch: AgentArch): string {
  return `worker-agent-linux-${arch}`;
}

/** Where the gateway serves it: the path names the version, so a cached copy is never stale. */
export function agentDownloadPath(version: string, arch: AgentArch): string {
  return `/agent/${encodeURIComponent(version)}/${agentBinaryName(arch)}`;
}

const digests = new Map<string, { size: number; mtimeMs: number; sha256: string }>();

/**
 * The binary's SHA-256 (hex): its `.sha256` sidecar when present (`<hex>  <name>`), else computed
 * once by streaming the file and kept while its size and mtime stay the same. Null when the
 * binary is not built for `arch` in `dir`.
 */
export async function agentBinarySha256(dir: string, arch: AgentArch): Promise<string | null> {
  const file = path.join(dir, agentBinaryName(arch));
  let stat: fs.Stats;
  try {
    stat = await fs.promises.stat(file);
  } catch {
    return null;
  }
  if (!stat.isFile()) return null;
  const cached = digests.get(file);
  if (cached && cached.size === stat.size && cached.mtimeMs === stat.mtimeMs) return cached.sha256;
  let sha256 = '';
  try {
    const sidecar = await fs.promises.readFile(`${file}.sha256`, 'utf8');
    const stated = sidecar.trim().split(/\s+/)[0] ?? '';
    if (/^[0-9a-f]{64}$/.test(stated)) sha256 = stated;
  } catch {
    // No sidecar: computed below.
  }
  if (!sha256) {
    const hash = crypto.createHash('sha256');
    for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
    sha256 = hash.digest('hex');
  }
  digests.set(file, { size: stat.size, mtimeMs: stat.mtimeMs, sha256 });
  return sha256;
}

/** package.json's version, found from this file up (it runs from sources and from dist/). */
export function platformVersion(start = __dirname): string {
  for (let directory = start; ; directory = path.dirname(directory)) {
    const candidate = path.join(directory, 'package.json');
    if (fs.existsSync(candidate)) return String(JSON.parse(fs.readFileSync(candidate, 'utf8')).version ?? '0.0.0');
    if (path.dirname(directory) === directory) return '0.0.0';
  }
}
