/**
 * `npm run build:agent`: the worker agent without a clone of this repository.
 * 1. One bundle (esbuild) of worker-agent/main.ts with worker.proto and the version inside:
 *    `dist/agent-package/bin/worker-agent.js`, the `bin` of an npm package laid out beside it
 *    (`dist/agent-package/`, checked with `npm pack --dry-run`).
 * 2. That bundle as a Node single executable application: `dist/bin/worker-agent-linux-<arch>`,
 *    this Node binary with the bundle and sharp's native modules (image jobs) injected by postject.
 * Prints the size and SHA-256 of each, and writes `<binary>.sha256`.
 * Flags: --skip-binary (the npm package only).
 */
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as esbuild from 'esbuild';
import { FILE_ASSET_PREFIX, MANIFEST_ASSET, type ModulesManifest } from './embedded-modules';

const ROOT = findRoot(__dirname);
const PACKAGE_DIR = path.join(ROOT, 'dist', 'agent-package');
const BUNDLE = path.join(PACKAGE_DIR, 'bin', 'worker-agent.js');
const BINARY = path.join(ROOT, 'dist', 'bin', `worker-agent-linux-${process.arch}`);
/** Node's SEA fuse: the string postject flips to tell the binary it carries a blob. */
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
/** The npm package's name (and its command). */
const AGENT_PACKAGE_NAME = 'inference-worker-agent';

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { 'skip-binary': { type: 'boolean', default: false } } });
  const version = readJson(path.join(ROOT, 'package.json')).version as string;
  await bundle(version);
  writePackage(version);
  report('npm package bin', BUNDLE);
  if (!values['skip-binary']) {
    buildBinary();
    report('single binary', BINARY);
  }
}

async function bundle(version: string): Promise<void> {
  fs.rmSync(PACKAGE_DIR, { recursive: true, force: true });
  const protobuf = require('protobufjs') as typeof import('protobufjs');
  const proto = new protobuf.Root().loadSync(path.join(ROOT, 'proto', 'worker', 'v1', 'worker.proto'), { keepCase: false }).toJSON();
  const sharpLoader = path.join(ROOT, 'worker-agent', 'packaging', 'sharp-loader.ts');
  await esbuild.build({
    entryPoints: [path.join(ROOT, 'worker-agent', 'main.ts')],
    outfile: BUNDLE,
    bundle: true, platform: 'node', target: 'node24', format: 'cjs',
    // Whitespace and syntax only: stack traces keep their names.
    minifyWhitespace: true, minifySyntax: true, legalComments: 'none', logLevel: 'warning',
    banner: { js: '#!/usr/bin/env node' },
    define: { __WORKER_PROTO_JSON__: JSON.stringify(proto), __AGENT_VERSION__: JSON.stringify(version) },
    // Native addons are loaded at run time: sharp through sharp-loader.ts (embedded in the
    // binary, a dependency of the package); node-llama-cpp only by the package, when installed.
    external: ['node-llama-cpp'],
    plugins: [{
      name: 'sharp-loader',
      setup(build) {
        build.onResolve({ filter: /^sharp$/ }, (args) => args.importer === sharpLoader ? { path: 'sharp', external: true } : { path: sharpLoader });
      },
    }],
  });
  fs.chmodSync(BUNDLE, 0o755);
}

function writePackage(version: string): void {
  const root = readJson(path.join(ROOT, 'package.json'));
  const sharpVersion = readJson(path.join(ROOT, 'node_modules', 'sharp', 'package.json')).version as string;
  const llamaVersion = readJson(path.join(ROOT, 'node_modules', 'node-llama-cpp', 'package.json')).version as string;
  const manifest = {
    name: AGENT_PACKAGE_NAME, version,
    description: 'Worker agent of the inference platform: runs next to vLLM, SGLang, TGI or llama.cpp and serves the jobs its control plane assigns.',
    license: root.license,
    bin: { [AGENT_PACKAGE_NAME]: 'bin/worker-agent.js' },
    files: ['bin/', 'worker-agent.service', 'README.md'],
    engines: { node: '>=22.19' },
    os: ['linux'],
    dependencies: { sharp: sharpVersion },
    peerDependencies: { 'node-llama-cpp': llamaVersion },
    peerDependenciesMeta: { 'node-llama-cpp': { optional: true } },
  };
  fs.writeFileSync(path.join(PACKAGE_DIR, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  for (const file of ['README.md', 'worker-agent.service']) {
    fs.copyFileSync(path.join(ROOT, 'worker-agent', 'packaging', file), path.join(PACKAGE_DIR, file));
  }
}

/** The sharp module tree (JS and the platform's native parts), as SEA assets. */
function embeddedModules(): { manifest: ModulesManifest; assets: Record<string, string> } {
  const packages = ['sharp', '@img/colour', 'detect-libc', 'semver', `@img/sharp-linux-${process.arch}`, `@img/sharp-libvips-linux-${process.arch}`];
  const files: string[] = [];
  const hash = crypto.createHash('sha256');
  for (const name of packages) {
    const directory = path.join(ROOT, 'node_modules', name);
    if (!fs.existsSync(directory)) throw new Error(`${name} is not installed: run npm ci first`);
    for (const file of walk(directory)) {
      const relative = path.relative(path.join(ROOT, 'node_modules'), file).split(path.sep).join('/');
      // sharp's C++ sources and install scripts are not needed to run it.
      if (/^sharp\/(src|install)\//.test(relative)) continue;
      files.push(relative);
      hash.update(relative).update(fs.readFileSync(file));
    }
  }
  const assets = Object.fromEntries(files.map((file) => [`${FILE_ASSET_PREFIX}${file}`, path.join(ROOT, 'node_modules', ...file.split('/'))]));
  return { manifest: { hash: hash.digest('hex'), files }, assets };
}

/** The supported runtime (.nvmrc): the binary is this Node, so an older one is refused. */
const BINARY_NODE_MAJOR = 24;

function buildBinary(): void {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < BINARY_NODE_MAJOR) {
    throw new Error(`the agent binary embeds the Node that builds it: run this with Node ${BINARY_NODE_MAJOR} (.nvmrc), not ${process.version}`);
  }
  const work = path.join(ROOT, 'dist', 'agent-sea');
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  const { manifest, assets } = embeddedModules();
  const manifestFile = path.join(work, MANIFEST_ASSET);
  fs.writeFileSync(manifestFile, JSON.stringify(manifest));
  const blob = path.join(work, 'sea-prep.blob');
  const config = {
    main: BUNDLE, output: blob, disableExperimentalSEAWarning: true,
    // V8's compiled code goes in too: a faster cold start for a few MB.
    useCodeCache: true,
    assets: { [MANIFEST_ASSET]: manifestFile, ...assets },
  };
  const configFile = path.join(work, 'sea-config.json');
  fs.writeFileSync(configFile, JSON.stringify(config));
  quietly(process.execPath, ['--experimental-sea-config', configFile]);
  fs.mkdirSync(path.dirname(BINARY), { recursive: true });
  fs.rmSync(BINARY, { force: true });
  fs.copyFileSync(process.execPath, BINARY);
  fs.chmodSync(BINARY, 0o755);
  quietly(process.execPath, [require.resolve('postject/dist/cli.js'), BINARY, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SEA_FUSE]);
  fs.rmSync(work, { recursive: true, force: true });
}

/** Runs a build step; its output (postject warns about ELF note names it does not touch) is shown only if it fails. */
function quietly(command: string, args: string[]): void {
  try {
    execFileSync(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const failed = error as { stdout?: Buffer; stderr?: Buffer };
    process.stderr.write(`${failed.stdout?.toString() ?? ''}${failed.stderr?.toString() ?? ''}`);
    throw error;
  }
}

function report(what: string, file: string): void {
  const bytes = fs.readFileSync(file);
  const sha256 = crypto.createHash('sha256').update(bytes).digest('hex');
  if (file === BINARY) fs.writeFileSync(`${file}.sha256`, `${sha256}  ${path.basename(file)}\n`);
  process.stdout.write(`${what}: ${path.relative(ROOT, file)}  ${(bytes.length / 1024 / 1024).toFixed(1)} MiB  sha256 ${sha256}\n`);
}

function* walk(directory: string): Generator<string> {
  for (const entry of fs.readdirSync(directory, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const full = path.join(directory, entry.name);
    if (entry.isDirectory()) yield* walk(full);
    else if (entry.isFile()) yield full;
  }
}

function readJson(file: string): any {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

function findRoot(start: string): string {
  for (let directory = start; ; directory = path.dirname(directory)) {
    if (fs.existsSync(path.join(directory, 'package-lock.json'))) return directory;
    if (path.dirname(directory) === directory) throw new Error('no project root above the build script');
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`build:agent failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  });
}
