import type { Logger } from 'pino';
import { collectDefaultMetrics, Counter, Gauge, Registry, type Metric } from 'prom-client';
import type { FinishedRequest, RequestObserver } from '../pipeline/finished-request';
import { AccumulatedHistogram, type HistogramSeries } from './accumulated-histogram';
import { RequestMetrics } from './request-metrics';
import { SCALING_POLICY_NAMES } from '../deployments/scaling-policy-names';

/** The `deployment` label of requests answered before their deployment was resolved (bad key, unknown slug, …). */
export const NO_DEPLOYMENT = 'none';

export interface QueueDepth {
  deployment: string;
  depth: number;
}

export interface ReplicaCount {
  deployment: string;
  state: string;
  count: number;
}

export interface InFlight {
  deployment: string;
  /** `owner` (the deployment's own workspace), `guest` (shared serving) or `batch` (lines of batches). */
  class: 'owner' | 'guest' | 'batch';
  count: number;
}

/** One replica's engine as its agent last reported it (Heartbeat.engine_signals). */
export interface ReplicaEngineLoad {
  deployment: string;
  replica: string;
  running: number;
  waiting: number;
  /** 0–1. */
  kvCacheUsage: number;
  /** 0–1 over the agent's last interval; null before the engine gave one (no series then). */
  prefixCacheHitRate: number | null;
}

export interface MetricsOptions {
  /**
   * The values the `route` label may take: a closed set the caller maps each request to (the
   * gateway's route labels), so neither a raw path nor user input ever becomes a label value
   * (each value is a time series kept forever). Any other value is counted as `other`.
   */
  routes: readonly string[];
  /** Read at scrape time: text and media jobs running on this server's agents, by priority class. */
  inFlight?: () => Promise<InFlight[]>;
  /** Read at scrape time: work waiting per deployment. Without it the gauge has no series. */
  queueDepth?: () => Promise<QueueDepth[]>;
  /** Read at scrape time: replicas per deployment and state. Without it the gauge has no series. */
  replicas?: () => Promise<ReplicaCount[]>;
  /**
   * Read at scrape time: the engine signals of this server's ready replicas that report them.
   * A replica gone (disconnected, ended) is simply absent, so its series leave with it.
   */
  replicaEngines?: () => Promise<ReplicaEngineLoad[]>;
  /** What this server holds of each held budget now (`inference_budget_held`). */
  budgetHeld?: () => Array<{ budget: string; held: number }>;
  /** Requests waiting at this server for a first replica, per deployment (`inference_cold_start_waiting`). */
  coldStartWaiting?: () => Array<{ deployment: string; waiting: number }>;
  /** Where a failing scrape-time source is reported; the scrape still answers, without that gauge. */
  logger?: Logger;
}

/** Text requests run up to the 120 s budget; media sync calls up to 30 s; async submissions take milliseconds. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const TTFT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** The `route` of a value outside MetricsOptions.routes. */
const OTHER_ROUTE = 'other';
const SCALING_ACTION = /^[a-z][a-z_]{0,31}$/;
const SCALING_POLICY: ReadonlySet<string> = new Set(SCALING_POLICY_NAMES);

interface RequestCell {
  readonly labels: { deployment: string; route: string; status: string };
  value: number;
}

class DeploymentSeries {
  /** Keyed by `routeIndex * 1000 + status`: the label tuple as one number, so no string is built per request. */
  readonly requests = new Map<number, RequestCell>();

  constructor(readonly deployment: string) {}
}

/**
 * The platform's Prometheus metrics, on a Registry of its own (several servers share a test
 * process). Request-path series are plain numbers behind cached Maps, handed to prom-client
 * only when scraped: recording a request costs tens of nanoseconds, where prom-client's
 * labelled children re-hash their labels on every `inc`/`observe` (~4 µs for one request's
 * series, measured). Low-rate series (autoscaler, spend) use prom-client directly. As a
 * RequestObserver it keeps the per-deployment series of finished text requests (request-metrics.ts).
 */
export class Metrics implements RequestObserver {
  readonly registry = new Registry();
  private readonly finishedRequests: RequestMetrics;
  private readonly deployments = new Map<string, DeploymentSeries>();
  private readonly durations = new AccumulatedHistogram('inference_request_duration_seconds',
    'Time from a request\'s arrival until it was answered (chat/completions: its last byte), by route.', 'route', DURATION_BUCKETS);
  private readonly timesToFirstToken = new AccumulatedHistogram('inference_time_to_first_token_seconds',
    'Streams: time from a request\'s arrival to its first byte written, by route.', 'route', TTFT_BUCKETS);
  private readonly durationByRoute: HistogramSeries[] = [];
  private readonly ttftByRoute: HistogramSeries[] = [];
  private readonly scalingDecisions: Counter<'deployment' | 'action' | 'policy'>;
  private readonly spend: Counter<'deployment'>;
  /** deployment → policy → reason → decisions. */
  private readonly routingCounts = new Map<string, Map<string, Map<string, number>>>();
  private sources: Pick<MetricsOptions, 'queueDepth' | 'replicas' | 'inFlight' | 'replicaEngines'>;
  /** budget → scope → refusals. */
  private readonly budgetRefusals = new Map<string, Map<string, number>>();
  private readonly coldStartRefusals: Counter<'deployment' | 'reason'>;
  private readonly logger: Logger | undefined;
  /** The `route` values by index (MetricsOptions.routes, then `other`): a request's cell is keyed by the index. */
  private readonly routes: readonly string[];
  private readonly routeIndex: ReadonlyMap<string, number>;
  private readonly otherRoute: number;

  constructor(options: MetricsOptions) {
    this.routes = [...new Set([...options.routes, OTHER_ROUTE])];
    this.routeIndex = new Map(this.routes.map((route, index) => [route, index]));
    this.otherRoute = this.routeIndex.get(OTHER_ROUTE)!;
    this.sources = { queueDepth: options.queueDepth, replicas: options.replicas, inFlight: options.inFlight, replicaEngines: options.replicaEngines };
    this.logger = options.logger;
    const registers = [this.registry];
    const requests: Counter<'deployment' | 'route' | 'status'> = new Counter({
      name: 'inference_requests_total', help: 'HTTP requests answered, by deployment, route and status code.',
      labelNames: ['deployment', 'route', 'status'], registers,
      collect: () => {
        requests.reset();
        for (const series of this.deployments.values()) {
          for (const cell of series.requests.values()) requests.inc(cell.labels, cell.value);
        }
      },
    });
    this.finishedRequests = new RequestMetrics(this.registry);
    // Not prom-client classes, but the collector shape its Registry reads (name, get, reset).
    this.registry.registerMetric(this.durations as unknown as Metric);
    this.registry.registerMetric(this.timesToFirstToken as unknown as Metric);
    const queueDepth: Gauge<'deployment'> = new Gauge({
      name: 'inference_queue_depth', help: 'Work waiting per deployment: text jobs queued on agents beyond their concurrency, plus queued request records.',
      labelNames: ['deployment'], registers,
      collect: () => this.collectGauge(queueDepth, this.sources.queueDepth, 'queue depth', (row) => queueDepth.set({ deployment: row.deployment }, row.depth)),
    });
    const replicas: Gauge<'deployment' | 'state'> = new Gauge({
      name: 'inference_replicas', help: 'Replicas per deployment and state (terminated replicas are not counted).',
      labelNames: ['deployment', 'state'], registers,
      collect: () => this.collectGauge(replicas, this.sources.replicas, 'replicas', (row) => replicas.set({ deployment: row.deployment, state: row.state }, row.count)),
    });
    const inFlight: Gauge<'deployment' | 'class'> = new Gauge({
      name: 'inference_in_flight', help: 'Jobs running on this server\'s agents, by deployment and priority class (owner, guest of shared serving, batch line).',
      labelNames: ['deployment', 'class'], registers,
      collect: () => this.collectGauge(inFlight, this.sources.inFlight, 'in-flight jobs', (row) => inFlight.set({ deployment: row.deployment, class: row.class }, row.count)),
    });
    const replicaGauge = (name: string, help: string, value: (row: ReplicaEngineLoad) => number | null) => {
      const gauge: Gauge<'deployment' | 'replica'> = new Gauge({
        name, help, labelNames: ['deployment', 'replica'], registers,
        collect: () => this.collectGauge(gauge, this.sources.replicaEngines, 'replica engine signals', (row) => {
          const reading = value(row);
          if (reading !== null) gauge.set({ deployment: row.deployment, replica: row.replica }, reading);
        }),
      });
    };
    replicaGauge('inference_replica_engine_requests_running',
      'Requests in the engine\'s running batch, as the engine of each of this server\'s replicas last reported it.', (row) => row.running);
    replicaGauge('inference_replica_engine_requests_waiting',
      'Requests waiting in the engine\'s own queue (not the agent\'s), per replica of this server.', (row) => row.waiting);
    replicaGauge('inference_replica_kv_cache_usage_ratio',
      'Fraction of the engine\'s KV cache in use, 0 to 1, per replica of this server.', (row) => row.kvCacheUsage);
    replicaGauge('inference_replica_prefix_cache_hit_ratio',
      'Fraction of prompt tokens served from the engine\'s prefix cache over the agent\'s last interval, 0 to 1, per replica of this server.',
      (row) => row.prefixCacheHitRate);
    this.scalingDecisions = new Counter({
      name: 'inference_autoscaler_decisions_total', help: 'Autoscaler decisions recorded, by deployment, action and scaling policy.',
      labelNames: ['deployment', 'action', 'policy'], registers,
    });
    this.spend = new Counter({
      name: 'inference_spend_usd_total', help: 'GPU spend metered, in US dollars, by deployment.',
      labelNames: ['deployment'], registers,
    });
    const routing: Counter<'deployment' | 'policy' | 'reason'> = new Counter({
      name: 'inference_routing_decisions_total',
      help: 'Replica choices of text requests, by deployment, routing policy and reason (prefix_hit, prefix_cold, load_fallback, no_prefix, only_replica, least_loaded, round_robin; for adapter jobs adapter_resident, adapter_loading, adapter_cpu, adapter_home, adapter_free_slot, adapter_evict, adapter_load_fallback).',
      labelNames: ['deployment', 'policy', 'reason'], registers,
      collect: () => {
        routing.reset();
        for (const [deployment, byPolicy] of this.routingCounts) {
          for (const [policy, byReason] of byPolicy) for (const [reason, count] of byReason) routing.inc({ deployment, policy, reason }, count);
        }
      },
    });
    const refusals: Counter<'budget' | 'scope'> = new Counter({
      name: 'inference_budget_refusals_total', help: 'Holds the tenant budget refused, by budget and scope (key, workspace, address, socket, server).',
      labelNames: ['budget', 'scope'], registers,
      collect: () => {
        refusals.reset();
        for (const [budget, byScope] of this.budgetRefusals) for (const [scope, count] of byScope) refusals.inc({ budget, scope }, count);
      },
    });
    const budgetHeld = options.budgetHeld;
    const held: Gauge<'budget'> = new Gauge({
      name: 'inference_budget_held', help: 'What this server holds of each held tenant budget now (connections, requests, bytes of memory, sockets, subscriptions, GraphQL operations and their cost).',
      labelNames: ['budget'], registers,
      collect: () => {
        held.reset();
        for (const row of budgetHeld?.() ?? []) held.set({ budget: row.budget }, row.held);
      },
    });
    const coldStartWaiting = options.coldStartWaiting;
    const waiting: Gauge<'deployment'> = new Gauge({
      name: 'inference_cold_start_waiting', help: 'Requests waiting at this server for a first replica of their deployment (scaled to zero, or starting), per deployment.',
      labelNames: ['deployment'], registers,
      collect: () => {
        waiting.reset();
        for (const row of coldStartWaiting?.() ?? []) waiting.set({ deployment: row.deployment }, row.waiting);
      },
    });
    this.coldStartRefusals = new Counter({
      name: 'inference_cold_start_refusals_total',
      help: 'Requests refused 503 while waiting for a first replica, by deployment and reason (queue_full: past coldStartQueueLimit at this server; max_wait: past COLD_START_MAX_WAIT_MS).',
      labelNames: ['deployment', 'reason'], registers,
    });
    collectDefaultMetrics({ register: this.registry, prefix: 'inference_' });
  }

  /** The tenant budget refused a hold (a closed set of budgets and scopes: no label explosion). */
  recordBudgetRefusal(budget: string, scope: string): void {
    let byScope = this.budgetRefusals.get(budget);
    if (!byScope) this.budgetRefusals.set(budget, (byScope = new Map()));
    byScope.set(scope, (byScope.get(scope) ?? 0) + 1);
  }

  /** One answered HTTP request. `deploymentId` must be a resolved deployment's id, or NO_DEPLOYMENT. */
  recordRequest(deploymentId: string, route: string, status: number, durationSeconds: number): void {
    const routeIndex = this.routeIndex.get(route) ?? this.otherRoute;
    const code = status >= 100 && status <= 599 ? status : 0;
    const requests = this.series(deploymentId).requests;
    const key = routeIndex * 1000 + code;
    const cell = requests.get(key);
    if (cell) {
      cell.value++;
    } else {
      requests.set(key, { labels: { deployment: deploymentId, route: this.routes[routeIndex], status: code === 0 ? 'other' : String(code) }, value: 1 });
    }
    if (durationSeconds >= 0) {
      (this.durationByRoute[routeIndex] ??= this.durations.series(this.routes[routeIndex])).observe(durationSeconds);
    }
  }

  /** A stream's first byte went out `seconds` after the request arrived. */
  recordTimeToFirstToken(route: string, seconds: number): void {
    if (!(seconds >= 0)) return;
    const routeIndex = this.routeIndex.get(route) ?? this.otherRoute;
    (this.ttftByRoute[routeIndex] ??= this.timesToFirstToken.series(this.routes[routeIndex])).observe(seconds);
  }

  /** A settled text request (the pipeline's RequestObservers): latency, first token, per output token, outcome and tokens by deployment and model. */
  requestFinished(request: FinishedRequest): void {
    this.finishedRequests.requestFinished(request);
  }

  /**
   * One autoscaler decision. `action` is a short snake_case word from a closed set
   * (`scale_up`, `scale_down`, `hold`); anything else is counted as `other`. `policy`: the
   * scaling policy that decided (`concurrency`, `slo`), another name counted as `other`.
   */
  recordScalingDecision(deploymentId: string, action: string, policy = 'concurrency'): void {
    this.scalingDecisions.inc({
      deployment: deploymentId, action: SCALING_ACTION.test(action) ? action : 'other', policy: SCALING_POLICY.has(policy) ? policy : 'other',
    });
  }

  /** A request refused past the cold-start queue's bounds (`queue_full` or `max_wait`: a closed set). */
  recordColdStartRefusal(deploymentId: string, reason: 'queue_full' | 'max_wait'): void {
    this.coldStartRefusals.inc({ deployment: deploymentId, reason });
  }

  /** One replica choice of a text request (cluster/job-router.ts). */
  recordRouting(deploymentId: string, policy: string, reason: string): void {
    // Once per text request: counted in plain maps (no label hashing, no string built), handed to prom-client at scrape.
    let byPolicy = this.routingCounts.get(deploymentId);
    if (!byPolicy) this.routingCounts.set(deploymentId, (byPolicy = new Map()));
    let byReason = byPolicy.get(policy);
    if (!byReason) byPolicy.set(policy, (byReason = new Map()));
    byReason.set(reason, (byReason.get(reason) ?? 0) + 1);
  }

  /**
   * GPU spend metered for a deployment, in US dollars. Counters only go up: a negative or
   * non-finite amount throws (a refund is not spend). Record it where it is metered once in
   * the cluster, so `sum()` over servers is the total.
   */
  recordSpend(deploymentId: string, usd: number): void {
    if (!Number.isFinite(usd) || usd < 0) throw new RangeError(`spend must be a finite, non-negative number of dollars, got ${usd}`);
    this.spend.inc({ deployment: deploymentId }, usd);
  }

  /** The Prometheus text exposition of every metric. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /**
   * Unregisters everything. prom-client's default GC metric keeps a process-wide
   * PerformanceObserver pointing at the registry; emptied, it no longer holds the control plane.
   */
  close(): void {
    this.registry.clear();
    this.sources = {};
  }

  private series(deploymentId: string): DeploymentSeries {
    let series = this.deployments.get(deploymentId);
    if (!series) {
      series = new DeploymentSeries(deploymentId);
      this.deployments.set(deploymentId, series);
    }
    return series;
  }

  private async collectGauge<Row>(gauge: Gauge<string>, source: (() => Promise<Row[]>) | undefined, what: string, set: (row: Row) => void): Promise<void> {
    let rows: Row[] = [];
    try {
      rows = source ? await source() : [];
    } catch (error) {
      this.logger?.warn({ err: error }, `could not read ${what} for /metrics; the gauge is left out of this scrape`);
    }
    // Reset and refill in one synchronous step: a concurrent scrape never sees half a gauge.
    gauge.reset();
    for (const row of rows) set(row);
  }
}
