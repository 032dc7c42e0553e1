/**
 * The wire types in proto/generated are what `npm run gen:proto` makes of the .proto files
 * today: the test runs the script's own generator command into a temporary folder and fails on
 * any file that differs, is missing or is left over. A .proto change without regenerating (or
 * a hand edit of a generated file) fails here; `npm run gen:proto` fixes it.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
const CHECKED_IN = path.join(ROOT, 'proto/generated');
const GENERATOR = path.join(ROOT, 'node_modules/@grpc/proto-loader/build/bin/proto-loader-gen-types.js');

/** The generator's arguments in the `gen:proto` script, with the output folder moved to `outDir`. */
function generatorArguments(outDir: string): string[] {
  const script: string = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts['gen:proto'];
  const command = script.slice(script.indexOf('proto-loader-gen-types')).trim().split(/\s+/);
  expect(command).toContain('--outDir=proto/generated');
  return command.slice(1).map((argument) => (argument.startsWith('--outDir=') ? `--outDir=${outDir}` : argument));
}

function filesUnder(directory: string): string[] {
  return (fs.readdirSync(directory, { recursive: true }) as string[])
    .filter((file) => fs.statSync(path.join(directory, file)).isFile())
    .map((file) => file.split(path.sep).join('/'))
    .sort();
}

describe('generated wire types', () => {
  let outDir: string;
  beforeAll(() => {
    outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'proto-gen-'));
    // From the project root, as npm runs the script: the generated files name their .proto by that path.
    execFileSync(process.execPath, [GENERATOR, ...generatorArguments(outDir)], { cwd: ROOT, stdio: 'pipe' });
  });
  afterAll(() => fs.rmSync(outDir, { recursive: true, force: true }));

  it('are checked in for both .proto files', () => {
    expect(filesUnder(CHECKED_IN)).toEqual(expect.arrayContaining(['worker.ts', 'cluster.ts', 'worker/v1/Assign.ts', 'cluster/v1/RelayJob.ts']));
  });

  it('match what `npm run gen:proto` makes of the .proto files now', () => {
    const generated = filesUnder(outDir);
    expect(filesUnder(CHECKED_IN)).toEqual(generated);
    const stale = generated.filter((file) => fs.readFileSync(path.join(outDir, file), 'utf8') !== fs.readFileSync(path.join(CHECKED_IN, file), 'utf8'));
    expect(stale).toEqual([]);
  });
});
