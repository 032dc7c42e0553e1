/**
 * `GET|HEAD /agent/{version}/worker-agent-linux-{arch}[.sha256]`: the worker agent's single
 * binary, for Kubernetes pods whose init container fetches it (docs/kubernetes.md) and anyone
 * installing an agent by hand. Public, as the npm package is. Only this server's version is
 * served, so a pod never runs an agent other than the one its SHA-256 was written for; the path
 * names the version, so caches may keep it forever. Streamed from disk, never held in memory.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Context, Next } from 'koa';
import { AGENT_ARCHES, agentBinaryName, agentBinarySha256, type AgentArch } from '../../common/agent-binary';
import { AppError } from '../../control-plane/errors/app-error';

const ROUTE = /^\/agent\/([^/]+)\/worker-agent-linux-([a-z0-9]+)(\.sha256)?$/;

export function agentDownloadRoute(binaryDir: string, version: string) {
  return async (context: Context, next: Next): Promise<void> => {
    const match = context.method === 'GET' || context.method === 'HEAD' ? ROUTE.exec(context.path) : null;
    if (!match) return await next();
    const [, askedVersion, arch, sidecar] = match;
    if (decodeURIComponent(askedVersion) !== version) {
      throw new AppError('not_found', `this server serves the agent of version ${version} only, not ${decodeURIComponent(askedVersion).slice(0, 64)}: /agent/${version}/${agentBinaryName('x64')}`);
    }
    const built = await builtArches(binaryDir);
    if (!(AGENT_ARCHES as readonly string[]).includes(arch) || !built.includes(arch as AgentArch)) {
      throw new AppError('not_found', `no agent binary for linux-${arch.slice(0, 16)} on this server; available: ${built.map((name) => `linux-${name}`).join(', ') || 'none (npm run build:agent)'}`);
    }
    const name = agentBinaryName(arch as AgentArch);
    const sha256 = (await agentBinarySha256(binaryDir, arch as AgentArch))!;
    context.set('x-checksum-sha256', sha256);
    context.set('cache-control', 'public, max-age=31536000, immutable');
    context.etag = sha256;
    if (sidecar) {
      context.type = 'text/plain';
      context.body = `${sha256}  ${name}\n`;
      return;
    }
    const file = path.join(binaryDir, name);
    const { size } = await fs.promises.stat(file);
    context.attachment(name);
    context.type = 'application/octet-stream';
    if (context.method === 'HEAD') {
      // No stream for HEAD: Koa would never read (or close) it.
      context.status = 200;
      context.length = size;
      return;
    }
    // Koa destroys the stream when the client goes away, so an aborted download leaks nothing.
    context.body = fs.createReadStream(file);
    context.length = size;
  };
}

async function builtArches(dir: string): Promise<AgentArch[]> {
  const found: AgentArch[] = [];
  for (const arch of AGENT_ARCHES) {
    if (await fs.promises.stat(path.join(dir, agentBinaryName(arch))).then((stat) => stat.isFile(), () => false)) found.push(arch);
  }
  return found;
}
