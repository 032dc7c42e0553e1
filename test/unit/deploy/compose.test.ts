/**
 * compose.yaml, checked without Docker: our services set only variables the code reads, with
 * values its config readers accept; their ports, commands and addresses agree with the code's
 * defaults and with each other (the database URL with the PostgreSQL service's credentials, the
 * S3 settings with MinIO's, the agent's flags with the agent's options).
 */
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { loadFullControlPlaneConfig } from '../../../control-plane/full-config';
import { loadGatewayConfig } from '../../../gateway/gateway-config';
import { agentOptionFields, loadAgentOptions } from '../../../worker-agent/agent-options';
import { envNamesInCode, execForm, parseDockerfile, ROOT, stagesOf } from './dockerfile-lint';

interface Service {
  image?: string; build?: { context: string; dockerfile: string }; command?: string[]; entrypoint?: string[];
  environment?: Record<string, string>; ports?: string[]; depends_on?: Record<string, { condition: string }>;
  profiles?: string[]; healthcheck?: { test: string[] }; volumes?: string[];
}

const compose = parse(fs.readFileSync(path.join(ROOT, 'compose.yaml'), 'utf8')) as { services: Record<string, Service>; volumes: Record<string, unknown> };
const { services } = compose;
/** `${VAR:-default}` as compose interpolates it with VAR unset. */
const interpolate = (env: Record<string, string> = {}) =>
  Object.fromEntries(Object.entries(env).map(([name, value]) => [name, String(value).replace(/\$\{\w+:-([^}]*)\}/g, '$1')]));
const server = services.server;
const serverEnv = interpolate(server.environment);

describe('compose.yaml', () => {
  it('has the server, PostgreSQL, Redis, an S3-compatible store and one CPU agent', () => {
    expect(Object.keys(services).sort()).toEqual(['agent', 'minio', 'minio-bucket', 'postgres', 'redis', 'server']);
  });

  it('pins every image to a release (PostgreSQL numbers its releases major.minor), none to latest', () => {
    for (const [name, service] of Object.entries(services)) {
      expect([name, service.image]).toEqual([name, expect.stringMatching(/:(v?\d+\.\d+(?:\.\d+)?[\w.-]*|RELEASE\.\d{4}-\d\d-\d\dT[\w-]+Z)$/)]);
    }
  });

  it('builds our two images from Dockerfiles that exist, with the repository as the context', () => {
    expect(server.build).toEqual({ context: '.', dockerfile: 'deploy/docker/server.Dockerfile' });
    expect(services.agent.build).toEqual({ context: '.', dockerfile: 'deploy/docker/agent.Dockerfile' });
    for (const service of [server, services.agent]) expect(fs.existsSync(path.join(ROOT, service.build!.dockerfile))).toBe(true);
  });

  it.each(['server', 'agent'])('%s sets only variables the code reads', (name) => {
    const names = envNamesInCode();
    expect(Object.keys(services[name].environment ?? {}).filter((variable) => !names.has(variable))).toEqual([]);
  });

  it('gives the server values it accepts: external PostgreSQL, Redis, S3 storage, every interface', () => {
    const gateway = loadGatewayConfig(serverEnv);
    const controlPlane = loadFullControlPlaneConfig(serverEnv);
    expect(controlPlane.databaseUrl).toBeDefined();
    expect(controlPlane.redisUrl).toBeDefined();
    expect(controlPlane.storage.storageProvider).toBe('s3');
    expect(gateway.host).toBe('0.0.0.0');
    expect(controlPlane.grpcHost).toBe('0.0.0.0');
  });

  it('publishes the ports the server listens on, which are the code\'s defaults and the image\'s EXPOSE', () => {
    const gateway = loadGatewayConfig(serverEnv);
    const controlPlane = loadFullControlPlaneConfig(serverEnv);
    expect([gateway.port, controlPlane.grpcPort]).toEqual([loadGatewayConfig({}).port, loadFullControlPlaneConfig({}).grpcPort]);
    const published = server.ports!.map((port) => port.split(':').map(Number));
    expect(published).toEqual([[gateway.port, gateway.port], [controlPlane.grpcPort, controlPlane.grpcPort]]);
    const image = stagesOf(parseDockerfile(fs.readFileSync(path.join(ROOT, server.build!.dockerfile), 'utf8'))).at(-1)!;
    const exposed = image.instructions.filter((i) => i.keyword === 'EXPOSE').flatMap((i) => i.args.split(/\s+/)).map(Number);
    expect(exposed).toEqual([gateway.port, controlPlane.grpcPort]);
    // No command: the image's (dist/gateway/main.js), which these tests check against the code.
    expect(server.command).toBeUndefined();
    expect(server.entrypoint).toBeUndefined();
    // The data volume is where the image's DATA_DIR is.
    expect(server.volumes).toEqual([`server-data:${serverEnv.DATA_DIR}`]);
    expect(loadFullControlPlaneConfig(serverEnv).clusterAddress).toBe(`server:${controlPlane.grpcPort}`);
  });

  it('connects the server to the PostgreSQL, Redis and MinIO services with their own credentials', () => {
    const database = new URL(serverEnv.DATABASE_URL);
    const postgres = services.postgres.environment!;
    expect([database.hostname, database.port, database.username, database.password, database.pathname.slice(1)])
      .toEqual(['postgres', '5432', postgres.POSTGRES_USER, postgres.POSTGRES_PASSWORD, postgres.POSTGRES_DB]);
    const redis = new URL(serverEnv.REDIS_URL);
    expect([redis.hostname, redis.port]).toEqual(['redis', '6379']);
    const s3 = new URL(serverEnv.S3_ENDPOINT);
    expect([s3.hostname, s3.port]).toEqual(['minio', '9000']);
    const minio = services.minio.environment!;
    expect([serverEnv.S3_ACCESS_KEY_ID, serverEnv.S3_SECRET_ACCESS_KEY]).toEqual([minio.MINIO_ROOT_USER, minio.MINIO_ROOT_PASSWORD]);
    expect(loadFullControlPlaneConfig(serverEnv).storage.s3ForcePathStyle).toBe(true);
    // The bucket the server writes to is made before it starts (the server does not create it).
    const makeBucket = services['minio-bucket'].command!.join(' ');
    expect(makeBucket).toContain(`mc alias set local ${serverEnv.S3_ENDPOINT} ${minio.MINIO_ROOT_USER} ${minio.MINIO_ROOT_PASSWORD}`);
    expect(makeBucket).toContain(`mc mb --ignore-existing local/${loadFullControlPlaneConfig(serverEnv).storage.outputBucket}`);
    expect(server.depends_on).toEqual({
      postgres: { condition: 'service_healthy' }, redis: { condition: 'service_healthy' }, 'minio-bucket': { condition: 'service_completed_successfully' },
    });
    for (const name of ['postgres', 'redis', 'minio']) expect(services[name].healthcheck).toBeDefined();
  });

  it('starts the agent with flags it has, the CPU engine, dialing the server\'s gRPC port', () => {
    const agent = services.agent;
    const flags = new Set(Object.values(agentOptionFields).map((field) => (field as { flag?: string }).flag).filter(Boolean).map((flag) => `--${flag}`));
    expect(agent.command!.filter((arg) => arg.startsWith('--') && !flags.has(arg))).toEqual([]);
    const options = loadAgentOptions(agent.command!, { ...interpolate(agent.environment), WORKER_JOIN_TOKEN: 'jt-test' });
    expect(options.controlPlaneAddress).toBe(`server:${loadFullControlPlaneConfig(serverEnv).grpcPort}`);
    expect(options.engineKind).toBe('cpu');
    expect(Object.keys(agent.environment!)).toContain('WORKER_JOIN_TOKEN');
    // Only with `--profile agent`: it needs a join token, which a deployment gives once created.
    expect(agent.profiles).toEqual(['agent']);
    expect(agent.depends_on).toEqual({ server: { condition: 'service_healthy' } });
    expect(execForm(JSON.stringify(agent.command))).not.toBeNull();
  });

  it('declares every named volume it mounts', () => {
    const mounted = Object.values(services).flatMap((service) => service.volumes ?? []).map((volume) => volume.split(':')[0]);
    expect(mounted.filter((volume) => !(volume in compose.volumes))).toEqual([]);
  });
});
