import pino, { type Logger } from 'pino';
import { startTestServer, type TestServer, type TestWorkspace } from '../support/test-server';
import { graphqlClient } from './support/graphql-client';
import { CapacityLoop } from '../../control-plane/capacity/capacity-loop';
import { Autoscaler } from '../../control-plane/autoscaling/autoscaler';
import { ScalingPolicies } from '../../control-plane/autoscaling/scaling-policies';
import type { ScalingPolicy } from '../../control-plane/autoscaling/scaling-policy';
import type { ScalingDecision } from '../../control-plane/autoscaling/scaling-decision';
import type { ScalingObservation } from '../../control-plane/autoscaling/scaling-observation';
import type { ClusterSignals } from '../../control-plane/autoscaling/cluster-scaling-signals';
import type { CapacityProvider } from '../../control-plane/replicas/capacity-provider';
import { ScalingDecisionRecord } from '../../control-plane/capacity/scaling-decision.entity';

/** A stand-in for the `slo` policy: two replicas, always, moved by "the forecast"; it counts its calls in its state. */
function testSloPolicy(seen: ScalingObservation[]): ScalingPolicy<{ calls: number }> {
  return {
    name: 'slo',
    newState: () => ({ calls: 0 }),
    decide(state, observation, now): ScalingDecision {
      state.calls++;
      seen.push(observation);
      const desired = Math.min(observation.maxReplicas, 2);
      const current = observation.currentReplicas;
      return {
        deploymentId: observation.deploymentId, at: now, action: desired > current ? 'scale_up' : desired < current ? 'scale_down' : 'hold',
        reason: 'slo_forecast', explanation: `call ${state.calls}`, desiredReplicas: desired, currentReplicas: current, readyReplicas: observation.readyReplicas,
        wantedReplicas: desired, recommendedReplicas: desired, signal: 0, perReplicaLoad: 0, targetConcurrency: observation.targetConcurrency,
        inFlight: observation.inFlight, queued: observation.queued, minReplicas: observation.minReplicas, maxReplicas: observation.maxReplicas,
        autoscale: observation.autoscale, capacityLimit: observation.capacityLimit ?? null,
        policy: 'slo', movedBy: 'forecast', forecastArrivalsPerSecond: 2.5,
      };
    },
  };
}

const SIGNALS: ClusterSignals = {
  arrivalsPerSecond: 3, idleMs: 1_234, kvCacheUsage: 0.6, observedP95Ms: 700, waitingForReplica: 0,
  prefixCacheHitRate: 0.25, meanPromptTokens: 300, meanOutputTokens: 90,
};

/**
 * The capacity loop runs each deployment's own policy (issue 39): `concurrency` (the Autoscaler)
 * or `slo`, from the registry main.ts builds; one state per deployment and policy, a fresh one
 * when the policy changes; the observation carries the SLO, scale to zero and the cluster's
 * signals; each decision is recorded with its policy, what moved it and the arrival rates.
 * The server's own loop is stopped: these tests step loops of their own on its database.
 */
describe('scaling policies in the capacity loop', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let graphql: ReturnType<typeof graphqlClient>;

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { localAgents: false } });
    await test.server.controlPlane.capacityLoop.stop();
    workspace = await test.createWorkspace();
    graphql = graphqlClient(test.url, workspace.apiKey);
  });

  afterAll(async () => {
    await test?.stop();
  });

  function loopWith(policies: ScalingPolicies, logger: Logger = pino({ level: 'silent' }), onDecision?: (decision: ScalingDecision) => void): CapacityLoop {
    const controlPlane = test.server.controlPlane;
    // External deployments: agents would join by themselves, so nothing is launched; no offers, so placement adds nothing.
    const external = { kind: 'external', offers: async () => [] } as unknown as CapacityProvider;
    return new CapacityLoop({
      dataSource: controlPlane.dataSource, deployments: controlPlane.deploymentStore, deploymentService: controlPlane.deployments,
      replicas: controlPlane.replicas, dispatcher: controlPlane.dispatcher, requestRecords: controlPlane.requestRecords,
      providers: new Map([['external', external]]), catalog: controlPlane.catalog, policies,
      signals: { observe: () => SIGNALS, forget: () => {} }, logger, onDecision,
    }, { intervalMs: 60_000, replicaLostGraceMs: 60_000 });
  }

  const create = async (input: Record<string, unknown>) => {
    const result = await graphql('mutation($input: CreateDeploymentInput!) { createDeployment(input: $input) { deployment { id } } }', {
      input: { modelId: 'meta-llama/Llama-3.1-8B-Instruct', priceCapPerHour: 1, minReplicas: 1, maxReplicas: 3, autoscale: true, provider: 'external', ...input },
    });
    expect(result.errors).toBeUndefined();
    return result.data.createDeployment.deployment.id as string;
  };
  const decisionsOf = async (deploymentId: string) => await test.server.controlPlane.dataSource.getRepository(ScalingDecisionRecord)
    .find({ where: { deploymentId }, order: { id: 'ASC' } });

  it('runs each deployment\'s policy and records it, what moved it, the forecast and the arrival rate', async () => {
    const concurrencyId = await create({});
    // Without scale to zero: at 0 replicas its wrapper would hold 0 with nothing waiting (scale-to-zero tests cover it).
    const sloId = await create({ scalingPolicy: 'SLO', slo: { ttftP95Ms: 800 } });
    const seen: ScalingObservation[] = [];
    const heard: ScalingDecision[] = [];
    const loop = loopWith(new ScalingPolicies({ concurrency: new Autoscaler(), slo: testSloPolicy(seen) }), undefined, (decision) => heard.push(decision));
    await loop.runOnce();

    // Only the slo deployment reached the test policy, with the SLO, scale to zero and every signal.
    expect(seen.map((observation) => observation.deploymentId)).toEqual([sloId]);
    expect(seen[0]).toMatchObject({
      slo: { ttftP95Ms: 800, tpotP95Ms: null, queueWaitP95Ms: null }, scaleToZeroAfterMs: null,
      arrivalsPerSecond: 3, kvCacheUsage: 0.6, observedP95Ms: 700, idleMs: 1_234, waitingForReplica: 0,
      serviceModel: { slots: 32, prefixHitRate: 0.25, meanPromptTokens: 300, meanOutputTokens: 90, startupMs: 60_000 },
    });

    const [concurrency] = await decisionsOf(concurrencyId);
    expect(concurrency).toMatchObject({ policy: 'concurrency', movedBy: 'in_flight', forecastArrivalsPerSecond: null, arrivalsPerSecond: 3 });
    const [slo] = await decisionsOf(sloId);
    expect(slo).toMatchObject({ policy: 'slo', movedBy: 'forecast', forecastArrivalsPerSecond: 2.5, arrivalsPerSecond: 3, reason: 'slo_forecast', desiredReplicas: 2 });
    expect(slo.inputs).toMatchObject({ kvCacheUsage: 0.6, observedP95Ms: 700, idleMs: 1_234, scaleToZeroAfterMs: null, slo: { ttftP95Ms: 800 } });
    expect((await test.server.controlPlane.deploymentStore.find(sloId))?.desiredReplicas).toBe(2);
    expect(heard.map((decision) => [decision.deploymentId, decision.policy])).toEqual(expect.arrayContaining([[concurrencyId, 'concurrency'], [sloId, 'slo']]));

    // The console reads them through the decision type.
    const listed = await graphql(`query($id: ID!) { deployment(id: $id) { scalingDecisions(limit: 5) { policy movedBy forecastArrivalsPerSecond arrivalsPerSecond reason } } }`, { id: sloId });
    expect(listed.data.deployment.scalingDecisions[0]).toEqual({ policy: 'slo', movedBy: 'forecast', forecastArrivalsPerSecond: 2.5, arrivalsPerSecond: 3, reason: 'slo_forecast' });
  });

  it('keeps one state per deployment and policy: a policy change starts the new policy from a fresh state, and is recorded', async () => {
    const id = await create({ scalingPolicy: 'SLO', slo: { ttftP95Ms: 1_000 } });
    const seen: ScalingObservation[] = [];
    const loop = loopWith(new ScalingPolicies({ concurrency: new Autoscaler(), slo: testSloPolicy(seen) }));
    const explanations = async () => (await decisionsOf(id)).map((decision) => [decision.policy, decision.policy === 'slo' ? decision.explanation : 'concurrency']);
    await loop.runOnce();
    await loop.runOnce();
    // No replica joins an external deployment here, so each pass orders 0 → 2 again (recorded): on the same state.
    expect(seen.filter((observation) => observation.deploymentId === id)).toHaveLength(2);
    expect(await explanations()).toEqual([['slo', 'call 1'], ['slo', 'call 2']]);

    const update = (input: Record<string, unknown>) => graphql('mutation($id: ID!, $input: UpdateDeploymentInput!) { updateDeployment(id: $id, input: $input) { scalingPolicy } }', { id, input });
    expect((await update({ scalingPolicy: 'CONCURRENCY' })).data.updateDeployment.scalingPolicy).toBe('CONCURRENCY');
    await loop.runOnce();
    expect((await update({ scalingPolicy: 'SLO' })).data.updateDeployment.scalingPolicy).toBe('SLO');
    await loop.runOnce();
    expect(await explanations()).toEqual([['slo', 'call 1'], ['slo', 'call 2'], ['concurrency', 'concurrency'], ['slo', 'call 1']]);
  });

  it('a deployment set to a policy this server lacks is scaled by concurrency, says so in its decisions, and is logged once', async () => {
    const id = await create({ scalingPolicy: 'SLO', slo: { ttftP95Ms: 1_000 } });
    const warnings: unknown[] = [];
    const logger = { warn: (...args: unknown[]) => warnings.push(args), error: () => {}, info: () => {}, debug: () => {} } as unknown as Logger;
    const loop = loopWith(new ScalingPolicies({ concurrency: new Autoscaler() }), logger);
    await loop.runOnce();
    await loop.runOnce();
    const decisions = await decisionsOf(id);
    expect(decisions.length).toBeGreaterThan(0);
    expect(decisions.every((decision) => decision.policy === 'concurrency')).toBe(true);
    const mine = warnings.filter((args) => JSON.stringify(args).includes(id));
    expect(mine).toHaveLength(1);
    expect(JSON.stringify(mine[0])).toContain('has no \'slo\' scaling policy');
  });
});
