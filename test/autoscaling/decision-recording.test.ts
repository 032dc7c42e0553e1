import { Autoscaler } from '../../control-plane/autoscaling/autoscaler';
import { shouldRecord } from '../../control-plane/autoscaling/decision-recording';
import type { ScalingDecision } from '../../control-plane/autoscaling/scaling-decision';
import { SimulatedDeployment } from './simulated-clock';

/** Keeps what shouldRecord selects, comparing with the last kept row as a caller would. */
function recorded(decisions: ScalingDecision[]): ScalingDecision[] {
  const kept: ScalingDecision[] = [];
  for (const decision of decisions) if (shouldRecord(kept.at(-1) ?? null, decision)) kept.push(decision);
  return kept;
}

describe('shouldRecord', () => {
  it('keeps one unchanged hold a minute: 60 rows for an hour of 720 steady decisions', () => {
    const deployment = new SimulatedDeployment(new Autoscaler(), { currentReplicas: 3 });
    const decisions = deployment.run(60 * 60_000, (now) => 25 + ((now / 5_000) % 2)); // 25 or 26 in flight: steady at 3
    expect(decisions).toHaveLength(720);
    expect(new Set(decisions.map((decision) => decision.reason))).toEqual(new Set(['within_tolerance']));
    const kept = recorded(decisions);
    expect(kept).toHaveLength(60);
    expect(kept.slice(1).every((decision, index) => decision.at - kept[index].at === 60_000)).toBe(true);
  });

  it('keeps every scale action, every change of reason and every settings change, as they happen', () => {
    const deployment = new SimulatedDeployment(new Autoscaler());
    deployment.run(20_000, () => 5);          // steady at 1
    deployment.run(20_000, () => 60);         // scale up to 5 then 6
    deployment.run(20_000, () => 60, { maxReplicas: 4 }); // lowered max: down to 4, then at_max holds
    deployment.run(20_000, () => 60, { capacityLimit: 3 }); // the price cap bites
    const kept = recorded(deployment.decisions);
    const actions = deployment.decisions.filter((decision) => decision.action !== 'hold');
    expect(actions.every((decision) => kept.includes(decision))).toBe(true);
    expect(kept.map((decision) => `${decision.at / 1000}:${decision.reason}:${decision.desiredReplicas}`)).toEqual([
      '0:within_tolerance:1', '20:scale_up:4', '25:scale_up:6', '30:within_tolerance:6', '40:at_max:4', '45:at_max:4', '60:capped_by_price:3', '65:capped_by_price:3',
    ]);
    // '45:at_max:4' is the hold after the scale-down (current replicas changed), and so on.
  });

  it('keeps a change of policy at once, though the hold is otherwise the same', () => {
    const deployment = new SimulatedDeployment(new Autoscaler(), { currentReplicas: 3 });
    const [first, next] = deployment.run(10_000, () => 25);
    expect([first.policy, next.reason, next.desiredReplicas]).toEqual(['concurrency', first.reason, first.desiredReplicas]);
    expect(shouldRecord(first, next)).toBe(false);
    expect(shouldRecord(first, { ...next, policy: 'slo' })).toBe(true);
  });

  it('keeps a change of autoscale even when the replica count does not move', () => {
    const deployment = new SimulatedDeployment(new Autoscaler());
    const [before] = deployment.run(5_000, () => 0);
    const [after] = deployment.run(5_000, () => 0, { autoscale: false });
    expect(before.desiredReplicas).toBe(after.desiredReplicas);
    expect(shouldRecord(before, after)).toBe(true);
  });
});
