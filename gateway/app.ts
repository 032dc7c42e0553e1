import http from 'node:http';
import type net from 'node:net';
import Koa from 'koa';
import type { Logger } from 'pino';
import { LocalObjectStore } from '../control-plane/api/records';
import { DEFAULT_AGENT_BINARY_DIR, type GatewayPorts } from '../control-plane/api/startup';
import type { GatewayConfig } from './gateway-config';
import { GraphQLServer } from './graphql/graphql-server';
import type { SubscriptionHub } from './graphql/subscription-hub';
import { fileLinkRoute } from './files/file-link.route';
import { fileUploadRoute } from './v1/batches/file-upload.route';
import { errorMiddleware } from './errors/error-middleware';
import { metricsRoute } from './http/metrics.route';
import { agentDownloadRoute } from './http/agent-download.route';
import { platformVersion } from '../common/agent-binary';
import { consoleRoute } from './http/console.route';
import { Readiness, readinessRoute } from './http/readiness.route';
import { RequestIds } from './http/request-id';
import { RequestLog } from './http/request-log';
import { requestTelemetry } from './http/request-telemetry';
import { routeLabel } from './route-label';
import { textFastLane } from './v1/text-fast-lane';
import { openApiRoute } from './openapi/openapi.route';
import { v1Router } from './v1/v1-router';
import { ConnectionBudget } from './http/connection-budget';
import { RequestGate } from './http/request-gate';
import { DownloadTally } from './files/object-download';

export interface Gateway {
  readonly server: http.Server;
  readonly url: string;
  readonly publicUrl: string;
  baseUrl(slug: string): string;
  /** The HTTP server's connections as the tenant budget sees them (tests, metrics). */
  readonly connections: ConnectionBudget;
  /** This server's graphql-ws subscriptions: how many are open, how many event renderings they took. */
  readonly subscriptions: Pick<SubscriptionHub, 'size' | 'renders'>;
  /** `/readyz` answers 503 from now on, so load balancers stop sending requests while the server drains. */
  beginShutdown(): void;
  stop(): Promise<void>;
  /** The bytes file downloads hold now, and the most one has held (tests read it). */
  readonly downloads: DownloadTally;
}

/**
 * The HTTP edge: `/d/<slug>/v1/*`, `/graphql` (+ subscriptions), `/healthz`, `/readyz`, `/metrics`, on one port.
 * It is given the control plane's ports (control-plane/api/, `gatewayPorts`), not the control plane: `/v1` and the
 * fast lane take `inference` (and `records`), GraphQL `admin`, the server's own plumbing `host`.
 */
export async function startGateway(ports: GatewayPorts, config: GatewayConfig, logger: Logger): Promise<Gateway> {
  const { inference, records, admin, host } = ports;
  // Koa 3 snapshots middleware in app.callback(): create the server first, attach the
  // callback only after every app.use(). headersTimeout also covers a connection that sends nothing at all (408, then closed); Node
  // checks it every connectionsCheckingInterval.
  const server = http.createServer({ keepAliveTimeout: 65_000, headersTimeout: config.headersTimeoutMs, connectionsCheckingInterval: Math.min(1_000, config.headersTimeoutMs) });
  const connections = new ConnectionBudget(host.budget, {
    minBodyBytesPerSecond: config.minBodyBytesPerSecond, bodyGraceMs: config.bodyGraceMs, responseStallMs: config.streamStallTimeoutMs,
  }, logger.child({ component: 'connections' }));
  connections.attach(server);
  const gate = new RequestGate(host.budget, inference.pipeline, connections, config.bodyMemoryThresholdBytes);
  let publicUrl = config.publicUrl ?? '';
  const graphql = new GraphQLServer(admin, server, () => publicUrl, {
    maxBodyBytes: config.graphqlMaxBodyBytes, anonymousMaxBodyBytes: config.graphqlAnonymousMaxBodyBytes, maxTokens: config.graphqlMaxTokens,
    keepAliveMs: config.graphqlKeepAliveMs, connectionInitTimeoutMs: config.graphqlConnectionInitTimeoutMs,
    maxDatabaseCost: config.graphqlMaxDatabaseCost, databaseQueriesPerOperation: config.graphqlDatabaseQueriesPerOperation,
  }, logger.child({ component: 'graphql' }), gate, {
    requestTimeoutMs: config.requestTimeoutMs, streamBufferBytes: config.streamBufferBytes, syncImageBudgetMs: host.config.requests.syncImageBudgetMs,
  });
  await graphql.start();

  const requestIds = new RequestIds();
  const readiness = new Readiness(host.readinessProbes, logger.child({ component: 'readiness' }));
  const app = new Koa();
  app.silent = true;
  const requestLog = new RequestLog(logger, config.logRequests);
  app.use(requestTelemetry(host.metrics, requestIds, requestLog, routeLabel, host.tracing));
  app.use(errorMiddleware(logger));
  app.use(async (context, next) => {
    if (context.path !== '/healthz') return await next();
    context.body = { status: 'ok' };
  });
  app.use(readinessRoute(readiness));
  app.use(metricsRoute(host.metrics, config.metricsToken));
  app.use(agentDownloadRoute(host.config.agentBinaryDir ?? DEFAULT_AGENT_BINARY_DIR, platformVersion(__dirname)));
  // Downloads stream: a client that stops reading holds a bounded buffer, and is cut after the stall timeout.
  const downloads = { stallTimeoutMs: config.streamStallTimeoutMs, maxBufferedBytes: 2 * config.streamBufferBytes, tally: new DownloadTally() };
  // Signed links of the local object store (agents upload there, clients download): no API key.
  if (host.managedStore instanceof LocalObjectStore) {
    app.use(fileLinkRoute({ store: host.managedStore, maxUploadBytes: host.config.storage.maxUploadBytes, downloads }));
  }
  // One-time upload links into the Files API (the console's adapter weights): any store, no API key.
  app.use(fileUploadRoute(records.fileUploads));
  app.use(openApiRoute());
  app.use(consoleRoute(config.consoleDir));
  app.use(graphql.middleware());
  const requests = host.config.requests;
  app.use(v1Router(inference, records, {
    maxBodyBytes: config.maxBodyBytes, requestTimeoutMs: config.requestTimeoutMs,
    maxMediaBodyBytes: requests.maxMediaBodyBytes, syncImageBudgetMs: requests.syncImageBudgetMs, downloads,
    maxFileBytes: host.config.batches.filesMaxBytes,
  }, gate));
  const koa = app.callback();
  const fastLane = textFastLane(inference, {
    maxBodyBytes: config.maxBodyBytes, requestTimeoutMs: config.requestTimeoutMs,
    streamStallTimeoutMs: config.streamStallTimeoutMs, streamBufferBytes: config.streamBufferBytes,
  }, logger, requestLog, requestIds, gate, host.tracing);
  server.on('request', (request, response) => {
    if (!fastLane(request, response)) void koa(request, response);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const { port } = server.address() as net.AddressInfo;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  publicUrl = (config.publicUrl ?? `http://localhost:${port}`).replace(/\/+$/, '');
  host.publicUrl.set(publicUrl);

  return {
    server, url, publicUrl, downloads: downloads.tally,
    baseUrl: (slug) => `${publicUrl}/d/${slug}/v1`,
    subscriptions: graphql.subscriptions,
    beginShutdown: () => readiness.beginShutdown(),
    connections,
    async stop() {
      readiness.beginShutdown();
      connections.stop();
      await graphql.stop();
      server.closeIdleConnections();
      // close() waits for every open connection; one that never ends (a client holding a
      // request open) must not hold the shutdown: after the grace, the rest are cut.
      const cut = setTimeout(() => server.closeAllConnections(), config.shutdownGraceMs);
      await new Promise<void>((resolve) => server.close(() => resolve()));
      clearTimeout(cut);
    },
  };
}
