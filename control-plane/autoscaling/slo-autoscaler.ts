import { AppError } from '../errors/app-error';
import { HoltWinters, type HoltWintersState } from './forecaster';
import { replicasForWaitTail } from './queueing';
import type { ScalingDecision, ScalingReason } from './scaling-decision';
import { validateObservation, type ScalingObservation } from './scaling-observation';
import type { ScalingPolicy } from './scaling-policy';
import { meanSlotHoldMs, prefillMs } from './service-model';
import { compileSloAutoscalerOptions, type CompiledSloAutoscalerOptions, type SloAutoscalerOptions } from './slo-autoscaler-options';

/** What the `slo` policy remembers of one deployment; plain data, owned by the caller. */
export interface SloState {
  lastAt: number | null;
  /** The arrival-rate forecaster's memory (Holt-Winters over samples of `forecastSampleMs`). */
  forecast: HoltWintersState;
  /** Arrivals and time summed toward the next forecaster sample. */
  sampleArrivals: number;
  sampleMs: number;
  /** Arrival rate per observation, and the time it covers, within the longest rate window. */
  rates: Array<{ at: number; rate: number; ms: number }>;
  /** In flight and arrival rate per observation within the hold window (Little's law). */
  load: Array<{ at: number; inFlight: number; rate: number }>;
  /** Replicas needed per decision within the scale-down window; the first is a seed at the current count. */
  needs: Array<{ at: number; replicas: number }>;
}

/** The per-replica numbers a decision sized with: the observation's service model, or derived. */
interface Sizing {
  slots: number;
  holdMs: number;
  /** Little's law's measure of the hold (null without load): engine pressure trusts it over the model's when longer. */
  measuredHoldMs: number | null;
  startupMs: number;
  /** Wait a request may have and still meet the SLO: the SLO less its prefill allowance. */
  waitBudgetMs: number;
  /** What the SLO is on, for the explanation. */
  sloText: string;
  derived: boolean;
}

/** The prefill a request's wait budget leaves room for: twice the mean prompt's, for the long prompts of the tail. */
const PREFILL_ALLOWANCE = 2;
/** Engine pressure trusts the measured slot hold over the model's only when it is this much longer. */
const MODEL_HOLD_TOLERANCE = 1.2;
/** The rate window stretches to at most this many `rateWindowMs` to collect `rateWindowArrivals`. */
const RATE_WINDOW_LIMIT = 6;

/**
 * The `slo` policy: sizes a deployment for its SLO rather than for a concurrency target.
 *
 * 1. **Rate**: arrivals per second now (the mean of `rateWindowMs`, longer until it holds
 *    `rateWindowArrivals`), and a Holt-Winters
 *    forecast (forecaster.ts) of the highest rate within one start-up time: a replica ordered
 *    now serves then, so that is the rate to size for.
 * 2. **Replicas for the SLO**: the fewest whose slots keep the share of requests waiting longer
 *    than the wait budget under 1 − `attainment`, in an M/M/c queue (queueing.ts) with the
 *    service model's slots and mean slot hold. Text: budget = TTFT SLO − twice the mean
 *    prompt's prefill; a stated time per output token caps the sequences one replica batches
 *    (decode time per token taken to grow in proportion to the batch). Media: the queue-wait SLO.
 *    Both rates get `rateHeadroom`. If the forecast needs more than the rate now: `pre_warm`.
 * 3. **Engine pressure, at once** (`slo_pressure`): `queuePressureThreshold` requests queued on
 *    the engines, or the busiest KV cache at `kvPressureThreshold` or more, re-size with the slot
 *    hold measured now (in flight plus queued over the arrival rate, when that is longer than
 *    the model's), and a queue adds the replicas that drain, within a start-up time, the backlog
 *    it projects a start-up from now; the measured p95 over
 *    the SLO with no replica starting: one more.
 * 4. **Scale down slowly**: only to the highest need of `scaleDownWindowMs` (each need taken at
 *    a rate `scaleDownTolerance` higher: hysteresis), `maxScaleDownStep` at a time; up at once.
 * 5. **Bounds** as the `concurrency` policy: [max(1, min), min(max, capacityLimit)], the floor
 *    winning; autoscale off pins at the floor. Scale to zero is the shared wrapper's.
 *
 * Without `serviceModel` in the observation, slots are the catalog's target concurrency, the
 * slot hold is in flight ÷ arrival rate over `holdWindowMs` (Little's law; `holdMs` until there
 * is load), prefill is taken as 0 and the start-up as `startupMs`.
 */
export class SloAutoscaler implements ScalingPolicy<SloState> {
  readonly name = 'slo' as const;
  readonly options: CompiledSloAutoscalerOptions;
  private readonly forecaster: HoltWinters;

  constructor(options: SloAutoscalerOptions = {}) {
    this.options = compileSloAutoscalerOptions(options);
    const { forecastAlpha, forecastBeta, forecastGamma, seasonMs, forecastSampleMs } = this.options;
    this.forecaster = new HoltWinters({
      alpha: forecastAlpha, beta: forecastBeta, gamma: forecastGamma,
      seasonLength: seasonMs === null ? null : Math.round(seasonMs / forecastSampleMs),
    });
  }

  newState(): SloState {
    return { lastAt: null, forecast: this.forecaster.newState(), sampleArrivals: 0, sampleMs: 0, rates: [], load: [], needs: [] };
  }

  decide(state: SloState, observation: ScalingObservation, now: number): ScalingDecision {
    validateObservation(observation);
    if (!Number.isFinite(now) || (state.lastAt !== null && now < state.lastAt)) {
      throw new AppError('internal_error', `slo autoscaler clock went from ${state.lastAt} back to ${now}`);
    }
    const options = this.options;
    const elapsedMs = state.lastAt === null ? 0 : now - state.lastAt;
    state.lastAt = now;
    const { currentReplicas: current, minReplicas, maxReplicas, autoscale, inFlight, queued } = observation;
    const capacityLimit = observation.capacityLimit ?? null;

    const sizing = this.sizing(state, observation, now);
    const observedRate = observation.arrivalsPerSecond ?? (inFlight + queued) / (sizing.holdMs / 1000);
    const rateNow = this.rateNow(state, now, observedRate, elapsedMs);
    const forecast = this.forecastPeak(state, observedRate, elapsedMs, sizing.startupMs);
    const forecastPeak = forecast?.peak ?? rateNow;

    const floor = Math.max(1, minReplicas);
    const ceiling = Math.max(floor, Math.min(maxReplicas, capacityLimit ?? Number.POSITIVE_INFINITY));
    const missShare = 1 - options.attainment;
    const size = (rate: number) => replicasForWaitTail(
      rate * (1 + options.rateHeadroom), sizing.slots, sizing.holdMs / 1000, sizing.waitBudgetMs / 1000, missShare, ceiling + 1);
    const forRateNow = size(rateNow);
    const forForecast = size(Math.max(rateNow, forecastPeak));

    // Engine pressure: what the engines say now corrects what the model expected. A queue on the
    // engines or a nearly full KV cache re-sizes with the slot hold measured (Little's law), and a
    // queue asks at least for the replicas its backlog needs when a new one could serve.
    let forPressure = 0;
    let pressureSignal: string | null = null;
    const kv = observation.kvCacheUsage ?? null;
    const queuePressed = queued >= options.queuePressureThreshold;
    if (observation.readyReplicas > 0 && (queuePressed || (kv !== null && kv >= options.kvPressureThreshold))) {
      // Little's law runs a little high while load falls and low while it rises: only a
      // measure a fifth over the model's says the model is wrong.
      const measured = sizing.measuredHoldMs ?? 0;
      const holdSeconds = (measured > MODEL_HOLD_TOLERANCE * sizing.holdMs ? measured : sizing.holdMs) / 1000;
      forPressure = Math.max(
        queuePressed ? forRateNow + replicasForBacklog(inFlight + queued, rateNow, current, sizing) : 0,
        replicasForWaitTail(rateNow * (1 + options.rateHeadroom), sizing.slots, holdSeconds, sizing.waitBudgetMs / 1000, missShare, ceiling + 1));
      pressureSignal = queuePressed ? 'queue' : 'kv_cache';
    }
    const observedP95 = observation.observedP95Ms ?? null;
    const sloMs = sloTargetMs(observation);
    if (observedP95 !== null && sloMs !== null && observedP95 > sloMs && observation.readyReplicas === current && current + 1 > forPressure) {
      forPressure = current + 1;
      pressureSignal = 'observed_p95';
    }

    const need = Math.max(forRateNow, forForecast, forPressure);
    let upReason: ScalingReason = 'slo_forecast';
    let movedBy = 'forecast';
    if (forPressure === need && forPressure > Math.max(forRateNow, forForecast)) {
      upReason = 'slo_pressure';
      movedBy = pressureSignal!;
    } else if (forForecast > forRateNow && forecast?.rising) {
      // Only a forecast that rises is a predicted rise; one above the rate now because its level
      // still lags a fall (minutes after a session ends) sizes as slo_forecast, and scale to zero
      // does not start a replica for it (scale-to-zero.ts).
      upReason = 'pre_warm';
    }

    // Scale down to the highest need of the window, seeded at the current count on a fresh state.
    // The window remembers the need at a rate `scaleDownTolerance` higher: hysteresis, so a rate
    // that hovers at a replica boundary does not buy and give back a replica (and its start-up) each minute.
    const needWithTolerance = Math.max(size(Math.max(rateNow, forecastPeak) * (1 + options.scaleDownTolerance)), forPressure);
    if (state.needs.length === 0) state.needs.push({ at: now, replicas: current });
    state.needs.push({ at: now, replicas: Math.max(need, needWithTolerance) });
    while (state.needs.length > 1 && state.needs[0].at <= now - options.scaleDownWindowMs) state.needs.shift();
    const downTo = state.needs.reduce((highest, entry) => Math.max(highest, entry.replicas), 0);

    let desired: number;
    let reason: ScalingReason;
    if (!autoscale) {
      desired = floor;
      reason = 'autoscale_off';
    } else {
      let wanted: number;
      if (need > current) {
        wanted = need;
        reason = upReason;
      } else if (downTo < current) {
        wanted = Math.max(downTo, current - options.maxScaleDownStep);
        reason = wanted === downTo ? 'scale_down' : 'step_limited';
      } else {
        wanted = current;
        reason = need < current ? 'stabilizing_down' : 'within_tolerance';
      }
      desired = Math.min(ceiling, Math.max(floor, wanted));
      if (wanted > ceiling || (need > current && current >= ceiling)) reason = capacityLimit !== null && capacityLimit < maxReplicas ? 'capped_by_price' : 'at_max';
      else if (wanted < floor || (desired === current && need < current && current <= floor)) reason = 'at_min';
      if (reason === 'scale_down' || reason === 'step_limited' || reason === 'stabilizing_down' || reason === 'within_tolerance' || reason === 'at_min') movedBy = 'forecast';
    }

    const action = desired > current ? 'scale_up' as const : desired < current ? 'scale_down' as const : 'hold' as const;
    const signal = inFlight + queued;
    const decision = {
      deploymentId: observation.deploymentId, at: now, action, reason, desiredReplicas: desired, currentReplicas: current,
      readyReplicas: observation.readyReplicas, wantedReplicas: need, recommendedReplicas: need, signal,
      perReplicaLoad: signal / Math.max(1, current), targetConcurrency: observation.targetConcurrency, inFlight, queued,
      minReplicas, maxReplicas, autoscale, capacityLimit, policy: this.name, movedBy,
      forecastArrivalsPerSecond: round(forecastPeak), arrivalsPerSecond: round(rateNow),
    };
    return {
      ...decision,
      explanation: explainSloDecision(decision, {
        sizing, attainment: options.attainment, forRateNow, forForecast, forPressure, downTo, floor, kv, observedP95,
        scaleDownWindowMs: options.scaleDownWindowMs,
      }),
    };
  }

  /**
   * The arrival rate now: the mean over the newest observations that span `rateWindowMs` and
   * hold `rateWindowArrivals` arrivals, up to `RATE_WINDOW_LIMIT` windows back. A count of n
   * arrivals is off by about √n, so a quiet deployment (a diffusion model at 0.5 req/s sees 10
   * arrivals in 20 s, ±30 %) averages longer rather than buying and returning replicas on noise.
   */
  private rateNow(state: SloState, now: number, rate: number, elapsedMs: number): number {
    const { rateWindowMs, rateWindowArrivals } = this.options;
    state.rates.push({ at: now, rate, ms: elapsedMs });
    while (state.rates[0].at <= now - RATE_WINDOW_LIMIT * rateWindowMs) state.rates.shift();
    let arrivals = 0;
    let spanMs = 0;
    for (let index = state.rates.length - 1; index >= 0; index--) {
      const entry = state.rates[index];
      arrivals += (entry.rate * entry.ms) / 1000;
      spanMs += entry.ms;
      if (spanMs >= rateWindowMs && arrivals >= rateWindowArrivals) break;
    }
    return spanMs > 0 ? (1000 * arrivals) / spanMs : rate;
  }

  /**
   * Feeds the forecaster whole samples of arrivals and returns the highest rate it expects
   * within one start-up time, and whether that is above its next sample's (a rise, not a level
   * that lags); null until it has two samples to trend from.
   */
  private forecastPeak(state: SloState, rate: number, elapsedMs: number, startupMs: number): { peak: number; rising: boolean } | null {
    const { forecastSampleMs } = this.options;
    state.sampleArrivals += (rate * elapsedMs) / 1000;
    state.sampleMs += elapsedMs;
    if (state.sampleMs >= forecastSampleMs) {
      this.forecaster.update(state.forecast, state.sampleArrivals / (state.sampleMs / 1000));
      state.sampleArrivals = 0;
      state.sampleMs = 0;
    }
    if (state.forecast.seen < 2) return null;
    const steps = Math.max(1, Math.ceil(startupMs / forecastSampleMs));
    const next = this.forecaster.forecast(state.forecast, 1);
    let peak = 0;
    for (let step = 1; step <= steps; step++) peak = Math.max(peak, this.forecaster.forecast(state.forecast, step));
    return { peak, rising: peak > next };
  }

  private sizing(state: SloState, observation: ScalingObservation, now: number): Sizing {
    const model = observation.serviceModel;
    const measuredHoldMs = this.measureHold(state, observation, now);
    const slo = observation.slo ?? null;
    const media = slo !== null && slo.ttftP95Ms === null && slo.queueWaitP95Ms !== null;
    if (model) {
      let slots = model.slots;
      const tpotAtFullBatchMs = 1000 / model.decodeTokensPerSecond;
      if (!media && slo?.tpotP95Ms != null && slo.tpotP95Ms < tpotAtFullBatchMs) {
        slots = Math.max(1, Math.floor((model.slots * slo.tpotP95Ms) / tpotAtFullBatchMs));
      }
      const prefill = media ? 0 : PREFILL_ALLOWANCE * prefillMs(model, model.meanPromptTokens);
      return { slots, holdMs: meanSlotHoldMs(model), measuredHoldMs, startupMs: model.startupMs, derived: false, ...budget(slo, media, prefill) };
    }
    return {
      slots: observation.targetConcurrency, holdMs: measuredHoldMs ?? this.options.holdMs, measuredHoldMs,
      startupMs: this.options.startupMs, derived: true, ...budget(slo, media, 0),
    };
  }

  /**
   * The slot hold measured by Little's law over `holdWindowMs`: mean in flight over mean arrival
   * rate (a window of minutes, so the noise of one 5 s count does not move it); null without load
   * or before half a window has been seen.
   */
  private measureHold(state: SloState, observation: ScalingObservation, now: number): number | null {
    const rate = observation.arrivalsPerSecond;
    if (rate !== undefined) state.load.push({ at: now, inFlight: observation.inFlight, rate });
    while (state.load.length > 0 && state.load[0].at <= now - this.options.holdWindowMs) state.load.shift();
    // Half a window at least: one sample's in flight over one 5 s count is noise, not a measure.
    if (state.load.length === 0 || now - state.load[0].at < this.options.holdWindowMs / 2) return null;
    const inFlight = state.load.reduce((sum, entry) => sum + entry.inFlight, 0);
    const arrivals = state.load.reduce((sum, entry) => sum + entry.rate, 0);
    return inFlight > 0 && arrivals > 0 ? (1000 * inFlight) / arrivals : null;
  }
}

/**
 * Replicas a backlog on the engines adds to what the rate needs. One ordered now serves a
 * start-up later, so what counts is the backlog then: the requests there now plus the start-up's
 * arrivals, less what the current replicas serve meanwhile (slots ÷ hold each per second), less
 * the steady in flight at the rate. Enough replicas to drain that within one more start-up time
 * (requests already that late have missed the SLO; what matters is that new ones stop waiting).
 * A backlog the current replicas drain before a new one could serve adds nothing.
 */
function replicasForBacklog(present: number, rate: number, current: number, sizing: Sizing): number {
  const startupSeconds = sizing.startupMs / 1000;
  const holdSeconds = sizing.holdMs / 1000;
  const servedMeanwhile = (current * sizing.slots * startupSeconds) / holdSeconds;
  const excessThen = Math.max(0, present + rate * startupSeconds - servedMeanwhile - rate * holdSeconds);
  return Math.ceil((excessThen * holdSeconds) / (sizing.slots * startupSeconds));
}

function budget(slo: ScalingObservation['slo'], media: boolean, prefillAllowanceMs: number): Pick<Sizing, 'waitBudgetMs' | 'sloText'> {
  if (slo && media) return { waitBudgetMs: slo.queueWaitP95Ms!, sloText: `the queue-wait SLO of ${slo.queueWaitP95Ms} ms` };
  if (slo && slo.ttftP95Ms !== null) {
    // A floor of a tenth of the SLO: a prompt so long its prefill eats the SLO is not fixed by replicas.
    return { waitBudgetMs: Math.max(slo.ttftP95Ms / 10, slo.ttftP95Ms - prefillAllowanceMs), sloText: `the TTFT SLO of ${slo.ttftP95Ms} ms` };
  }
  return { waitBudgetMs: 0, sloText: 'no SLO stated, so no wait at all' };
}

function sloTargetMs(observation: ScalingObservation): number | null {
  const slo = observation.slo ?? null;
  if (slo === null) return null;
  return slo.ttftP95Ms ?? slo.queueWaitP95Ms ?? null;
}

interface ExplanationContext {
  sizing: Sizing;
  attainment: number;
  forRateNow: number;
  forForecast: number;
  forPressure: number;
  downTo: number;
  floor: number;
  kv: number | null;
  observedP95: number | null;
  scaleDownWindowMs: number;
}

/** One sentence with the numbers the decision came from. */
export function explainSloDecision(
  decision: Omit<ScalingDecision, 'explanation'> & { forecastArrivalsPerSecond: number; arrivalsPerSecond: number },
  context: ExplanationContext,
): string {
  const { action, currentReplicas: current, desiredReplicas: desired } = decision;
  const { sizing } = context;
  const what = action === 'hold' ? `Holding ${replicas(current)}`
    : `Scaling ${action === 'scale_up' ? 'up' : 'down'} from ${current} to ${replicas(desired)}`;
  const model = `${sizing.derived ? 'measured ' : ''}${sizing.slots} ${sizing.slots === 1 ? 'slot' : 'slots'} a replica and ${round(sizing.holdMs / 1000)} s a request`;
  const sized = (count: number, rate: number) =>
    `at ${round(rate)} req/s, ${replicas(count)} ${count === 1 ? 'keeps' : 'keep'} ${round(context.attainment * 100)} % of waits under ${round(sizing.waitBudgetMs / 1000)} s in an M/M/c queue, for ${sizing.sloText} (${model})`;
  const now = sized(context.forRateNow, decision.arrivalsPerSecond);
  const ahead = `the forecast is ${round(decision.forecastArrivalsPerSecond)} req/s within the ${round(sizing.startupMs / 1000)} s start-up`;
  switch (decision.reason) {
    case 'slo_forecast':
      return `${what}: ${now}; ${ahead}.`;
    case 'pre_warm':
      return `${what} ahead of a predicted rise: ${ahead}, for which ${sized(context.forForecast, decision.forecastArrivalsPerSecond)}; now ${context.forRateNow} would do.`;
    case 'slo_pressure': {
      const signal = decision.movedBy === 'observed_p95'
        ? `the measured p95 of the last minute is ${round(context.observedP95 ?? 0)} ms, over the SLO, with no replica starting`
        : decision.movedBy === 'queue'
          ? `${decision.queued} requests wait for a slot on the engines`
          : `the busiest engine's KV cache is ${round((context.kv ?? 0) * 100)} % full`;
      return `${what} at once: ${signal}; with ${decision.inFlight} in flight and ${decision.queued} queued at ${round(decision.arrivalsPerSecond)} req/s, the SLO needs ${replicas(context.forPressure)}; the model alone asked for ${Math.max(context.forRateNow, context.forForecast)}.`;
    }
    case 'scale_down':
    case 'step_limited':
      return `${what}: for the last ${round(context.scaleDownWindowMs / 1000)} s the SLO has needed at most ${replicas(context.downTo)}${decision.reason === 'step_limited' ? ', removing one step at a time' : ''}; ${now}.`;
    case 'stabilizing_down':
      return `${what}: fewer would do now, but scale-down waits until the need has stayed low for ${round(context.scaleDownWindowMs / 1000)} s (highest need in that window: ${context.downTo}); ${now}.`;
    case 'within_tolerance':
      return `${what}: ${now}; ${ahead}.`;
    case 'at_max':
      return `${what}: the maximum is ${decision.maxReplicas}; the SLO asks for ${decision.wantedReplicas}; ${ahead}.`;
    case 'capped_by_price':
      return `${what}: placement can get at most ${replicas(decision.capacityLimit ?? 0)} under the price cap right now; the SLO asks for ${decision.wantedReplicas}.`;
    case 'at_min':
      return `${what}: the minimum is ${replicas(context.floor)}${decision.minReplicas < 1 ? ' (never fewer than 1)' : ''}; ${now}.`;
    case 'autoscale_off':
      return `${what}: autoscale is off, so the deployment is pinned at its minimum of ${replicas(context.floor)}; the SLO asks for ${decision.wantedReplicas}.`;
    default:
      return `${what}: ${now}.`;
  }
}

function replicas(count: number): string {
  return `${count} ${count === 1 ? 'replica' : 'replicas'}`;
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
