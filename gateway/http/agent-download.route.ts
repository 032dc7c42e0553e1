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
import { AppError, shortened } from '../../control-plane/api/errors';

/**
 * The only two names answered. The file opened is built from a listed arch alone, never from the
 * path, so `..` or an encoded `/` can reach nothing: anything else falls through to the 404.
 */
const ROUTE = /^\/agent\/([^/]+)\/worker-agent-linux-([a-z0-9]+)(\.sha256)?$/;

export function agentDownloadRoute(binaryDir: string, version: string) {
  // Concurrent first requests for a binary without a sidecar (a scale-up starting several pods)
  // share one hashing of its ~116 MB; later ones find agentBinarySha256's cache.
  const hashing = new Map<AgentArch, Promise<string | null>>();
  const sha256Of = (arch: AgentArch): Promise<string | null> => {
    let pending = hashing.get(arch);
    if (!pending) {
      pending = agentBinarySha256(binaryDir, arch).finally(() => hashing.delete(arch));
      hashing.set(arch, pending);
    }
    return pending;
  };

  return async (context: Context, next: Next): Promise<void> => {
    const match = context.method === 'GET' || context.method === 'HEAD' ? ROUTE.exec(context.path) : null;
    if (!match) return await next();
    const [, askedVersion, arch, sidecar] = match;
    const built = await builtArches(binaryDir);
    const asked = decoded(askedVersion);
    if (asked !== version) {
      throw new AppError('not_found', `this server serves the agent of version ${version} only, not ${shortened(asked)}: ${available(version, built)}`);
    }
    const sha256 = isAgentArch(arch) && built.includes(arch) ? await sha256Of(arch) : null;
    // Null too when the binary went away since builtArches looked (a rebuild in progress).
    if (!isAgentArch(arch) || !sha256) {
      throw new AppError('not_found', `no agent binary for linux-${shortened(arch)} on this server: ${available(version, built)}`);
    }
    const name = agentBinaryName(arch);
    context.status = 200;
    context.set('cache-control', 'public, max-age=31536000, immutable');
    context.etag = sha256;
    // A revalidating cache (If-None-Match) gets a 304 instead of the bytes again.
    if (context.fresh) {
      context.status = 304;
      return;
    }
    if (sidecar) {
      // `sha256sum -c` format: two spaces, then the name the file is saved under.
      context.type = 'text/plain';
      context.body = `${sha256}  ${name}\n`;
      return;
    }
    context.set('x-checksum-sha256', sha256);
    context.attachment(name);
    context.type = 'application/octet-stream';
    await sendFile(context, path.join(binaryDir, name));
  };
}

/**
 * Opens the file first and takes its size from that descriptor, so content-length matches the
 * bytes streamed even when a rebuild replaces the file meanwhile (the SHA-256 then tells the
 * client, which is what it is for). Koa destroys a stream body when the response ends or the
 * client goes away, and the stream closes its descriptor: an aborted download leaks nothing.
 */
async function sendFile(context: Context, file: string): Promise<void> {
  if (context.method === 'HEAD') {
    // No stream for HEAD: nothing would read it.
    context.length = (await fs.promises.stat(file)).size;
    return;
  }
  const handle = await fs.promises.open(file, 'r');
  let size: number;
  try {
    size = (await handle.stat()).size;
  } catch (error) {
    await handle.close();
    throw error;
  }
  context.body = handle.createReadStream();
  // After the body: Koa drops content-length when a stream is set.
  context.length = size;
}

function isAgentArch(arch: string): arch is AgentArch {
  return (AGENT_ARCHES as readonly string[]).includes(arch);
}

/** What a 404 offers instead: the paths that do answer here. */
function available(version: string, built: readonly AgentArch[]): string {
  if (built.length === 0) return 'no agent binary is built on this server (npm run build:agent)';
  return `available: ${built.map((arch) => `linux-${arch} (/agent/${encodeURIComponent(version)}/${agentBinaryName(arch)})`).join(', ')}`;
}

/** A path segment as the client meant it; a malformed escape is just another wrong version. */
function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

async function builtArches(dir: string): Promise<AgentArch[]> {
  const found: AgentArch[] = [];
  for (const arch of AGENT_ARCHES) {
    if (await fs.promises.stat(path.join(dir, agentBinaryName(arch))).then((stat) => stat.isFile(), () => false)) found.push(arch);
  }
  return found;
}
