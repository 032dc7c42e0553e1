import { QueueAutoscaler } from '../../control-plane/autoscaling/queue-autoscaler';
import type { ScalingObservation } from '../../control-plane/autoscaling/scaling-observation';

function observe(overrides: Partial<ScalingObservation>): ScalingObservation {
  return {
    deploymentId: 'dep_queue', inFlight: 0, queued: 0, currentReplicas: 1, readyReplicas: 1, targetConcurrency: 16,
    minReplicas: 1, maxReplicas: 20, autoscale: true, ...overrides,
  };
}

describe('QueueAutoscaler (KEDA-style)', () => {
  it('wants ceil(waiting / threshold) replicas, reads the queue once per polling interval, and names the rule', () => {
    const policy = new QueueAutoscaler();
    const state = policy.newState();
    const first = policy.decide(state, observe({ queued: 12, inFlight: 16 }), 0);
    expect(first).toMatchObject({ policy: 'queue', movedBy: 'queue', reason: 'queue_threshold', wantedReplicas: 3, desiredReplicas: 3, inFlight: 16, queued: 12 });
    expect(first.explanation).toBe('Scaling up from 1 to 3 replicas: 12 requests waiting on the engines at the last poll, 5 per replica: ceil(12 / 5) = 3; HPA follows.');
    // 10 s later the engines report 40 waiting, but KEDA has not polled again; at 30 s it has (+4 or ×2: 3 → 7).
    expect(policy.decide(state, observe({ queued: 40, currentReplicas: 3, readyReplicas: 1 }), 10_000)).toMatchObject({ desiredReplicas: 3, wantedReplicas: 3 });
    expect(policy.decide(state, observe({ queued: 40, currentReplicas: 3, readyReplicas: 1 }), 30_000)).toMatchObject({ desiredReplicas: 7, wantedReplicas: 8, reason: 'step_limited' });
  });

  it('gives replicas back to the floor once the queue has read 0 for the HPA window, however busy the slots are', () => {
    const policy = new QueueAutoscaler();
    const state = policy.newState();
    policy.decide(state, observe({ queued: 30, currentReplicas: 6, readyReplicas: 6 }), 0);
    let at = 0;
    let decision = policy.decide(state, observe({ queued: 0, inFlight: 96, currentReplicas: 6, readyReplicas: 6 }), (at += 30_000));
    expect(decision).toMatchObject({ desiredReplicas: 6, reason: 'stabilizing_down' });
    while (decision.action === 'hold') decision = policy.decide(state, observe({ queued: 0, inFlight: 96, currentReplicas: 6, readyReplicas: 6 }), (at += 30_000));
    expect(decision).toMatchObject({ at: 300_000, desiredReplicas: 1, reason: 'at_min' });
  });

  it('refuses a threshold or polling interval that cannot work, naming it', () => {
    expect(() => new QueueAutoscaler({ threshold: 0 })).toThrow(expect.objectContaining({ code: 'invalid_request', param: 'threshold' }));
    expect(() => new QueueAutoscaler({ pollingIntervalMs: -5 })).toThrow(expect.objectContaining({ param: 'pollingIntervalMs' }));
  });
});
