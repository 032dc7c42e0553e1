// `npm start`'s prestart: builds (`npm run build`) only when a source is newer than the last
// build, so a second start costs a walk of the tree (tens of milliseconds), not tsc, codegen
// and Vite (30 s). Plain CommonJS with no dependencies: it runs before anything is compiled.
// `--stamp` records a build that just ended; `--check` prints `stale` or `fresh` and exits 1 or 0 without building (tests use it).
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
/** Where the last successful build left its time. */
const STAMP = path.join(ROOT, 'dist', '.build-stamp');
/** What `npm run build` reads: the TypeScript folders, the console's sources, and the files that configure them. */
const INPUT_DIRS = ['common', 'control-plane', 'gateway', 'worker-agent', 'proto', 'cli', 'bench', 'console'];
const INPUT_FILES = ['package.json', 'package-lock.json', 'tsconfig.json', 'schema.graphql'];
/** Written by the build itself (console/src/gql is codegen's output), or not read by it. */
const SKIPPED = new Set(['node_modules', 'dist', 'gql', '.git']);

/** The newest modification time under `entry` (a file or a folder), 0 when it does not exist. */
function newest(entry) {
  let stat;
  try {
    stat = fs.statSync(entry);
  } catch {
    return 0;
  }
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const child of fs.readdirSync(entry)) {
    if (!SKIPPED.has(child)) latest = Math.max(latest, newest(path.join(entry, child)));
  }
  return latest;
}

function stale() {
  let built;
  try {
    built = fs.statSync(STAMP).mtimeMs;
  } catch {
    return true;
  }
  return [...INPUT_DIRS, ...INPUT_FILES].some((entry) => newest(path.join(ROOT, entry)) > built);
}

// `npm run build` ends with `--stamp`: a build however started counts, so the next start does not build again.
if (process.argv.includes('--stamp')) {
  fs.mkdirSync(path.dirname(STAMP), { recursive: true });
  fs.writeFileSync(STAMP, `${new Date().toISOString()}\n`);
  process.exit(0);
}
if (process.argv.includes('--check')) {
  const isStale = stale();
  process.stdout.write(isStale ? 'stale\n' : 'fresh\n');
  process.exit(isStale ? 1 : 0);
}
if (stale()) {
  const startedAt = Date.now();
  process.stdout.write('building (sources changed since the last build)…\n');
  const npm = process.env.npm_execpath
    ? spawnSync(process.execPath, [process.env.npm_execpath, 'run', 'build'], { cwd: ROOT, stdio: 'inherit' })
    : spawnSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit' });
  if (npm.status !== 0) process.exit(npm.status ?? 1);
  process.stdout.write(`built in ${((Date.now() - startedAt) / 1000).toFixed(1)} s\n`);
}
