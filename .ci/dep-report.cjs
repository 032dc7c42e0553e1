#!/usr/bin/env node
/**
 * Numbers about the import graph, from `depcruise --output-type json` with the rules of
 * .dependency-cruiser.cjs: import circles, violations per rule, the strongly connected sets of
 * folders in control-plane/, gateway/ and worker-agent/ (within each, a folder or a top-level
 * file is one node: folder A imports folder B when any file of A imports one of B) and the
 * control-plane imports that run up across the layers.
 *
 *   node .ci/dep-report.cjs [--root DIR] [--check-folders] [--verbose]
 *
 * --root DIR         cruise another checkout (e.g. an older commit unpacked with git archive),
 *                    with this checkout's rules
 * --check-folders    exit 1 when the folders of control-plane/, gateway/ or worker-agent/ import
 *                    each other in a circle other than the known one below (the file rules alone
 *                    would let folders grow into a circle, as long as no file circle comes with it)
 * --verbose          list the upward imports and the folder circles
 */
'use strict';
const { execFileSync } = require('node:child_process');
const path = require('node:path');

/**
 * Folder circles that are known and accepted (docs/layers.md): api-keys authenticates a key
 * against its workspace's row (deleted? credit left?), and workspaces/ opens a workspace with
 * its first key (workspace-admin.ts, first-run.ts). The files form no circle.
 */
const KNOWN_FOLDER_CIRCLES = [['control-plane/api-keys', 'control-plane/workspaces']];

/** The top-level folders whose own folders (and top-level files) must form no circle. */
const FOLDER_SCOPES = ['control-plane', 'gateway', 'worker-agent'];

const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const rootIndex = args.indexOf('--root');
const ROOT = path.resolve(rootIndex >= 0 ? args[rootIndex + 1] : path.join(__dirname, '..'));
const CONFIG = path.join(__dirname, '..', '.dependency-cruiser.cjs');
const { layers } = require(CONFIG);
const SOURCES = ['control-plane', 'gateway', 'worker-agent', 'proto', 'common'].filter((dir) => require('node:fs').existsSync(path.join(ROOT, dir)));

const depcruise = path.join(__dirname, '..', 'node_modules', '.bin', 'depcruise');
let output;
try {
  output = execFileSync(depcruise, ['--config', CONFIG, '--output-type', 'json', ...SOURCES], { cwd: ROOT, maxBuffer: 256 << 20, encoding: 'utf8' });
} catch (error) {
  // depcruise exits non-zero when it finds violations; its JSON is on stdout all the same.
  if (!error.stdout) throw error;
  output = error.stdout;
}
const result = JSON.parse(output);

/** control-plane/requests/x.ts → `control-plane/requests`; gateway/app.ts → `gateway/app.ts`; outside FOLDER_SCOPES null. */
function unitOf(file) {
  const parts = file ? file.split('/') : [];
  if (parts.length < 2 || !FOLDER_SCOPES.includes(parts[0])) return null;
  return `${parts[0]}/${parts[1]}`;
}
const scopeOf = (unit) => unit.slice(0, unit.indexOf('/'));
/** `control-plane/requests` → `requests` (the name LAYERS gives it); another scope's unit: null. */
const controlPlaneName = (unit) => (scopeOf(unit) === 'control-plane' ? unit.slice('control-plane/'.length) : null);
const layerNames = Object.keys(layers);
function layerOf(unit) {
  unit = controlPlaneName(unit);
  if (unit === null) return -1;
  for (const [index, name] of layerNames.entries()) {
    if (layers[name].some((entry) => (entry.endsWith('/') ? entry.slice(0, -1) === unit : entry === unit))) return index;
  }
  return -1;
}

// Folder graph and the upward imports.
const edges = new Map();
const upward = [];
for (const module of result.modules) {
  const from = unitOf(module.source);
  if (!from) continue;
  if (!edges.has(from)) edges.set(from, new Set());
  for (const dependency of module.dependencies) {
    const to = unitOf(dependency.resolved);
    // Arrows between the scopes are the file rules' business (control-plane never imports gateway, …).
    if (!to || to === from || scopeOf(to) !== scopeOf(from)) continue;
    edges.get(from).add(to);
    if (!edges.has(to)) edges.set(to, new Set());
    const [fromLayer, toLayer] = [layerOf(from), layerOf(to)];
    if (fromLayer >= 0 && toLayer > fromLayer) {
      const typeOnly = dependency.dependencyTypes.includes('type-only') ? ' (type-only)' : '';
      upward.push(`${module.source} → ${dependency.resolved}${typeOnly}  [${layerNames[fromLayer]} → ${layerNames[toLayer]}]`);
    }
  }
}

// Tarjan's strongly connected components.
const sets = [];
{
  let counter = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const visit = (node) => {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const next of edges.get(node)) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node), low.get(next)));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node), index.get(next)));
    }
    if (low.get(node) === index.get(node)) {
      const set = [];
      let member;
      do {
        member = stack.pop();
        onStack.delete(member);
        set.push(member);
      } while (member !== node);
      sets.push(set.sort());
    }
  };
  for (const node of [...edges.keys()].sort()) if (!index.has(node)) visit(node);
}
const circles = sets.filter((set) => set.length > 1).sort((left, right) => right.length - left.length);
const controlPlaneCircles = circles.filter((set) => scopeOf(set[0]) === 'control-plane');
const largest = (controlPlaneCircles[0] ?? []).map(controlPlaneName);
const isFolder = (unit) => !unit.endsWith('.ts');
const controlPlaneUnits = [...edges.keys()].filter((unit) => scopeOf(unit) === 'control-plane');

const perRule = {};
for (const violation of result.summary.violations) perRule[violation.rule.name] = (perRule[violation.rule.name] ?? 0) + 1;
const unassigned = controlPlaneUnits.filter((unit) => layerOf(unit) < 0).map(controlPlaneName).sort();
const upwardFolderArrows = new Set(upward.map((line) => line.replace(/^control-plane\/([^/ ]+)(\/\S*)? → control-plane\/([^/ ]+).*$/, '$1 → $3')));

console.log(`cruised: ${SOURCES.join(' ')} (${result.summary.totalCruised} modules, ${result.summary.totalDependenciesCruised} dependencies) in ${ROOT}`);
console.log(`import circles (no-circular): ${perRule['no-circular'] ?? 0}`);
console.log(`violations per rule: ${Object.keys(perRule).length ? Object.entries(perRule).map(([rule, count]) => `${rule} ${count}`).join(', ') : 'none'}`);
console.log(`control-plane units: ${controlPlaneUnits.length} (${controlPlaneUnits.filter(isFolder).length} folders)`);
console.log(`largest strongly connected set of control-plane folders: ${largest.filter(isFolder).length} folders` +
  (largest.length ? ` (${largest.length} units: ${largest.join(', ')})` : ''));
console.log(`folder circles: ${circles.length}${circles.length ? ` (${FOLDER_SCOPES.map((scope) => `${scope} ${circles.filter((set) => scopeOf(set[0]) === scope).length}`).join(', ')})` : ''}`);
console.log(`imports running up across layers: ${upward.length} (${upwardFolderArrows.size} folder arrows)`);
if (unassigned.length) console.log(`units in no layer: ${unassigned.join(', ')}`);
if (flag('--verbose')) {
  for (const line of upward) console.log(`  up: ${line}`);
  for (const set of circles) {
    console.log(`  folder circle: ${set.join(', ')}`);
    for (const from of set) {
      const inside = [...edges.get(from)].filter((to) => set.includes(to)).sort();
      console.log(`    ${from} → ${inside.join(', ')}`);
    }
  }
}
const known = (set) => KNOWN_FOLDER_CIRCLES.some((circle) => circle.length === set.length && circle.every((unit) => set.includes(unit)));
const unknown = circles.filter((set) => !known(set));
if (flag('--check-folders') && unknown.length) {
  console.error(`folders import each other in a new circle: ${unknown.map((set) => set.join(' ↔ ')).join('; ')}` +
    ' (node .ci/dep-report.cjs --verbose lists its arrows; docs/layers.md says how such circles were broken)');
  process.exit(1);
}
