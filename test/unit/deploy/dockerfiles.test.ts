/**
 * The container images (deploy/docker/*.Dockerfile), checked without Docker: hadolint's main
 * rules, every ENV name one the code reads (and its value one the config readers accept), every
 * COPY source present (in the build context, or made by the build stage), the ports, the
 * health check and the command against the code's.
 */
import fs from 'node:fs';
import path from 'node:path';
import { DEFAULT_CATALOG_PATH } from '../../../control-plane/catalog/catalog';
import { loadFullControlPlaneConfig } from '../../../control-plane/full-config';
import { loadGatewayConfig } from '../../../gateway/gateway-config';
import {
  dockerignoreMatcher, envNamesInCode, envPairs, execForm, lintDockerfile, parseDockerfile, ROOT, splitFlags, stagesOf, type Stage,
} from './dockerfile-lint';

const SERVER = 'deploy/docker/server.Dockerfile';
const AGENT = 'deploy/docker/agent.Dockerfile';
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');
const stages = (file: string) => stagesOf(parseDockerfile(read(file)));
const final = (file: string) => stages(file).at(-1)!;
const ignored = dockerignoreMatcher(read('.dockerignore'));

function env(stage: Stage): Record<string, string> {
  return Object.assign({}, ...stage.instructions.filter((i) => i.keyword === 'ENV').map((i) => envPairs(i.args)));
}

function lastArgs(stage: Stage, keyword: string): string[] {
  const found = stage.instructions.filter((i) => i.keyword === keyword).at(-1);
  return found ? execForm(found.args)! : [];
}

describe('the Dockerfile linter (hadolint rules as checks)', () => {
  const clean = [
    'FROM node:24.22.3-bookworm-slim AS build', 'WORKDIR /src', 'COPY a b',
    'FROM node:24.22.3-bookworm-slim', 'WORKDIR /app', 'COPY --from=build /src/b ./',
    'RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*',
    'USER 1000:1000', 'HEALTHCHECK CMD ["true"]', 'CMD ["node", "x.js"]',
  ];
  const lint = (replace: Record<number, string | null>) =>
    lintDockerfile(clean.map((line, index) => (index in replace ? replace[index] : line)).filter((line) => line !== null).join('\n'));

  it('passes a clean file', () => {
    expect(lint({})).toEqual([]);
  });

  it.each([
    [{ 3: 'FROM node' }, 'DL3006'],
    [{ 3: 'FROM node:latest' }, 'DL3007'],
    [{ 3: 'FROM node:24-bookworm-slim' }, 'not pinned to a full version'],
    [{ 6: 'RUN apt-get update && apt-get install -y tini && rm -rf /var/lib/apt/lists/*' }, 'DL3015'],
    [{ 6: 'RUN apt-get update && apt-get install --no-install-recommends tini && rm -rf /var/lib/apt/lists/*' }, 'DL3014'],
    [{ 6: 'RUN apt-get update && apt-get install -y --no-install-recommends tini' }, 'DL3009'],
    [{ 6: 'RUN apt update' }, 'DL3027'],
    [{ 6: 'RUN sudo true' }, 'DL3004'],
    [{ 7: null }, 'DL3002 the final stage sets no USER'],
    [{ 7: 'USER root' }, 'DL3002 the last USER is root'],
    [{ 7: null, 9: 'CMD ["node", "x.js"]\nUSER 1000' }, 'USER comes after CMD'],
    [{ 8: null }, 'no HEALTHCHECK'],
    [{ 8: 'HEALTHCHECK CMD curl -f http://localhost/' }, 'HEALTHCHECK must be NONE or CMD in exec form'],
    [{ 9: 'CMD node x.js' }, 'DL3025'],
    [{ 2: 'ADD a b' }, 'DL3020'],
    [{ 1: 'WORKDIR src' }, 'DL3000'],
    [{ 1: null }, 'DL3045'],
    [{ 5: 'COPY --from=builder /src/b ./' }, 'DL3022'],
  ])('flags %j (%s)', (replace, rule) => {
    expect(lint(replace as Record<number, string | null>).join('\n')).toContain(rule);
  });

  it('reads .dockerignore as Docker does', () => {
    const match = dockerignoreMatcher('node_modules\n**/*.test.ts\nbench/results\n!keep/x\nkeep');
    expect(match('node_modules/x/y.js')).toBe(true);
    expect(match('gateway/app.test.ts')).toBe(true);
    expect(match('app.test.ts')).toBe(true);
    expect(match('gateway/app.ts')).toBe(false);
    expect(match('bench/results/a.json')).toBe(true);
    expect(match('bench/README.md')).toBe(false);
    expect(match('keep/x')).toBe(true); // a later rule wins
  });
});

describe.each([SERVER, AGENT])('%s', (file) => {
  it('lints clean', () => {
    expect(lintDockerfile(read(file))).toEqual([]);
  });

  it('sets only variables the code reads', () => {
    const names = envNamesInCode();
    const all = stages(file).flatMap((stage) => Object.keys(env(stage)));
    expect(all.filter((name) => !names.has(name))).toEqual([]);
  });

  it('copies from the build context only what exists there and .dockerignore lets through', () => {
    for (const stage of stages(file)) {
      for (const copy of stage.instructions.filter((i) => i.keyword === 'COPY')) {
        const { flags, rest } = splitFlags(copy.args);
        if (flags.from) continue;
        for (const source of rest.split(/\s+/).slice(0, -1)) {
          expect([source, fs.existsSync(path.join(ROOT, source))]).toEqual([source, true]);
          expect([source, ignored(source)]).toEqual([source, false]);
        }
      }
    }
  });

  it('copies from the build stage only what it holds: a file of the context it copied, or what its RUNs make', () => {
    const [build, runtime] = stages(file);
    const workdir = build.instructions.find((i) => i.keyword === 'WORKDIR')!.args;
    const copied = build.instructions.filter((i) => i.keyword === 'COPY').flatMap((i) => splitFlags(i.args).rest.split(/\s+/).slice(0, -1));
    const runs = build.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args).join('\n');
    // What the build stage's commands write, and the command that writes each.
    const made: Record<string, RegExp> = {
      'node_modules/': /npm ci/, 'dist/agent-package/': /build-agent\.js/, 'dist/': /npm run build|tsc -p/,
    };
    for (const copy of runtime.instructions.filter((i) => i.keyword === 'COPY' && splitFlags(i.args).flags.from)) {
      for (const source of splitFlags(copy.args).rest.split(/\s+/).slice(0, -1)) {
        expect(source.startsWith(`${workdir}/`)).toBe(true);
        const relative = source.slice(workdir.length + 1);
        const producer = Object.keys(made).find((prefix) => relative.startsWith(prefix));
        if (producer) {
          expect([relative, made[producer].test(runs)]).toEqual([relative, true]);
          continue;
        }
        const fromContext = copied.some((entry) => relative === entry || (entry.endsWith('/') && relative.startsWith(entry)) || (entry === './' && !relative.includes('/')));
        expect([relative, fromContext, fs.existsSync(path.join(ROOT, relative))]).toEqual([relative, true, true]);
      }
    }
  });

  it('builds with every folder tsconfig.json compiles', () => {
    const include = (JSON.parse(read('tsconfig.json')) as { include: string[] }).include;
    const copied = stages(file)[0].instructions.filter((i) => i.keyword === 'COPY').map((i) => splitFlags(i.args).rest.split(/\s+/)[0].replace(/\/$/, ''));
    expect(include.filter((folder) => !copied.includes(folder))).toEqual([]);
  });
});

describe('the server image', () => {
  const runtime = final(SERVER);
  const runtimeEnv = env(runtime);
  const workdir = runtime.instructions.find((i) => i.keyword === 'WORKDIR')!.args;

  it('sets values the server accepts, and listens on every interface', () => {
    const gateway = loadGatewayConfig(runtimeEnv);
    const controlPlane = loadFullControlPlaneConfig(runtimeEnv);
    expect(gateway.host).toBe('0.0.0.0');
    expect(controlPlane.grpcHost).toBe('0.0.0.0');
    expect(controlPlane.dataDir).toBe(runtimeEnv.DATA_DIR);
    // DATA_DIR exists and belongs to the user the server runs as.
    const user = runtime.instructions.filter((i) => i.keyword === 'USER').at(-1)!.args;
    expect(runtime.instructions.some((i) => i.keyword === 'RUN' && i.args.includes(`mkdir -p ${runtimeEnv.DATA_DIR}`) && i.args.includes(`chown ${user} ${runtimeEnv.DATA_DIR}`))).toBe(true);
  });

  it('exposes the HTTP and gRPC ports it listens on', () => {
    const exposed = runtime.instructions.filter((i) => i.keyword === 'EXPOSE').flatMap((i) => i.args.split(/\s+/)).map(Number);
    expect(exposed.sort()).toEqual([loadGatewayConfig(runtimeEnv).port, loadFullControlPlaneConfig(runtimeEnv).grpcPort].sort());
  });

  it('checks its health on /readyz of its own HTTP port', () => {
    const check = splitFlags(runtime.instructions.find((i) => i.keyword === 'HEALTHCHECK')!.args).rest;
    const command = execForm(check.slice(4).trim())!;
    expect(command.slice(0, 2)).toEqual(['node', '-e']);
    expect(command[2]).toContain("'http://127.0.0.1:'+(process.env.PORT||8080)+'/readyz'");
    expect(command[2]).toContain('r.status===200');
    expect(read('gateway/http/readiness.route.ts')).toContain("context.path !== '/readyz'");
    expect(loadGatewayConfig({}).port).toBe(8080);
  });

  it('runs the compiled server under tini, from a layout like the repository', () => {
    expect(lastArgs(runtime, 'ENTRYPOINT')).toEqual(['/usr/bin/tini', '--']);
    const cmd = lastArgs(runtime, 'CMD');
    expect(cmd).toEqual(['node', 'dist/gateway/main.js']);
    expect(fs.existsSync(path.join(ROOT, 'gateway/main.ts'))).toBe(true);
    // npm start's launcher starts the same file.
    expect(read('gateway/launch.ts')).toContain("path.join(__dirname, 'main.js')");
    expect(workdir).toBe('/app');
  });

  it('carries every file outside dist/ the server reads at run time', () => {
    const destinations = runtime.instructions.filter((i) => i.keyword === 'COPY').map((i) => {
      const parts = splitFlags(i.args).rest.split(/\s+/);
      const destination = parts.at(-1)!;
      return destination === './' ? parts.slice(0, -1).map((source) => path.basename(source)) : [destination.replace(/\/$/, '')];
    }).flat();
    const needed = [
      'package.json', // PROJECT_ROOT is where package.json is (control-plane/project-root.ts); the version is read from it
      path.relative(ROOT, DEFAULT_CATALOG_PATH), // control-plane/catalog/models.json
      'proto/worker/v1/worker.proto', // proto/worker/v1/index.ts: <root>/proto/worker/v1/worker.proto
      'proto/cluster/v1/cluster.proto', // proto/cluster/v1/index.ts: <root>/proto, cluster/v1/cluster.proto
      'dist', 'node_modules',
      'vendor', // node_modules links to vendor/no-gpu-binary (package.json's overrides)
    ];
    expect(needed.filter((file) => !destinations.includes(file))).toEqual([]);
    expect(read('proto/worker/v1/index.ts')).toContain("'../../../../proto/worker/v1/worker.proto'");
    expect(read('proto/cluster/v1/index.ts')).toContain("'cluster/v1/cluster.proto'");
  });
});

describe('the agent image', () => {
  const runtime = final(AGENT);

  it('runs the agent package the build lays out', () => {
    const entrypoint = lastArgs(runtime, 'ENTRYPOINT');
    const workdir = runtime.instructions.find((i) => i.keyword === 'WORKDIR')!.args;
    expect(entrypoint).toEqual(['/usr/bin/tini', '--', 'node', `${workdir}/bin/worker-agent.js`]);
    expect(read('worker-agent/packaging/build-agent.ts')).toContain("path.join(PACKAGE_DIR, 'bin', 'worker-agent.js')");
    expect(runtime.instructions.some((i) => i.keyword === 'COPY' && i.args.includes('/src/dist/agent-package/'))).toBe(true);
  });

  it('says on purpose that it has no health check, and exposes no port', () => {
    expect(runtime.instructions.find((i) => i.keyword === 'HEALTHCHECK')!.args).toBe('NONE');
    expect(runtime.instructions.some((i) => i.keyword === 'EXPOSE')).toBe(false);
  });
});
