/**
 * The single binary (a Node single executable application) carries the npm modules it cannot
 * bundle, native addons, as SEA assets: a manifest and one asset per file. Such a module is
 * written once to a cache directory (under a name holding the build's hash, so two builds never
 * share one) and loaded from there with a `require` rooted at it, as Node's SEA docs advise.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import * as sea from 'node:sea';

/** The asset holding the list of embedded files. */
export const MANIFEST_ASSET = 'modules.json';
/** Each embedded file's asset key: this prefix and its path under node_modules. */
export const FILE_ASSET_PREFIX = 'node_modules/';

export interface ModulesManifest {
  /** What the files hash to together: names the cache directory. */
  hash: string;
  /** Paths under node_modules, '/'-separated. */
  files: string[];
}

/** True in the single binary; false under `node` (a clone or the npm package). */
export function runningAsBinary(): boolean {
  return sea.isSea();
}

let root: string | undefined;

/** `require(name)` from the binary's embedded modules, written to the cache on first use. */
export function requireEmbedded(name: string): unknown {
  root ??= extract(cacheBase());
  return createRequire(path.join(root, 'index.js'))(name);
}

/**
 * systemd's CacheDirectory= (CACHE_DIRECTORY), WORKER_MODULE_CACHE_DIR, the XDG cache, ~/.cache,
 * else the temporary directory: the first that is set (and, for the home, exists).
 */
function cacheBase(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env.WORKER_MODULE_CACHE_DIR || env.CACHE_DIRECTORY?.split(':')[0] || env.XDG_CACHE_HOME;
  if (explicit) return path.join(explicit, 'inference-worker-agent');
  const home = os.homedir();
  if (home && fs.existsSync(home)) return path.join(home, '.cache', 'inference-worker-agent');
  return path.join(os.tmpdir(), 'inference-worker-agent');
}

function extract(base: string): string {
  const manifest = JSON.parse(sea.getAsset(MANIFEST_ASSET, 'utf8')) as ModulesManifest;
  const directory = path.join(base, `modules-${manifest.hash.slice(0, 16)}`);
  if (fs.existsSync(path.join(directory, '.complete'))) return directory;
  // Written beside and renamed into place: an agent killed halfway leaves no half tree, and
  // two agents starting together each write their own copy; the first rename wins.
  const staging = `${directory}.${process.pid}.${crypto.randomBytes(4).toString('hex')}`;
  for (const file of manifest.files) {
    const target = path.join(staging, 'node_modules', ...file.split('/'));
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, new Uint8Array(sea.getRawAsset(`${FILE_ASSET_PREFIX}${file}`) as ArrayBuffer), { mode: 0o644 });
  }
  fs.writeFileSync(path.join(staging, '.complete'), manifest.hash);
  try {
    fs.renameSync(staging, directory);
  } catch (error) {
    fs.rmSync(staging, { recursive: true, force: true });
    if (!fs.existsSync(path.join(directory, '.complete'))) throw error;
  }
  return directory;
}
