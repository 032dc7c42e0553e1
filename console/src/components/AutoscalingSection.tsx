import { useState } from 'react';
import { useMutation } from 'urql';
import { graphql } from '../gql';
import type { ScalingPolicy } from '../gql/graphql';
import { AutoscalingFields, AUTOSCALING_PARAMS, draftOf, inputOf, sloWords, type AutoscalingDraft, type SloTarget, type SloValues } from './AutoscalingFields';
import { AutoscalingHistory } from './AutoscalingHistory';
import { UnplacedError } from './Field';
import { TableScroll } from './TableScroll';
import { RangeButtons, type RangeKey } from './history-range';

const UPDATE_AUTOSCALING = graphql(`
  mutation UpdateAutoscaling($id: ID!, $input: UpdateDeploymentInput!) {
    updateDeployment(id: $id, input: $input) {
      id scalingPolicy slo { ttftP95Ms tpotP95Ms queueWaitP95Ms } scaleToZeroAfterSeconds coldStartQueueLimit updatedAt
    }
  }
`);

const POLICY_WORDS: Record<ScalingPolicy, string> = {
  CONCURRENCY: 'Concurrency: in-flight plus queued requests per replica against the model\'s target',
  SLO: 'SLO: as many replicas as the SLO needs, from a forecast of arrivals and the engines\' queue and KV-cache use',
};

export interface AutoscalingSettings {
  id: string;
  scalingPolicy: ScalingPolicy;
  slo?: SloValues | null;
  scaleToZeroAfterSeconds?: number | null;
  coldStartQueueLimit: number;
  maxReplicas: number;
}

/**
 * The deployment's autoscaling: its policy and SLO stated, an editor for them (each API error
 * beside its field), and how it did over the page's range: attainment, forecast against
 * arrivals, cost against fixed-max.
 */
export function AutoscalingSection({ deployment, targets, editable, rangeKey, onRange }: {
  deployment: AutoscalingSettings; targets: readonly SloTarget[]; editable: boolean; rangeKey: RangeKey; onRange: (key: RangeKey) => void;
}) {
  const [draft, setDraft] = useState<AutoscalingDraft | null>(null);
  const [saved, save] = useMutation(UPDATE_AUTOSCALING);
  const slo = sloWords(deployment.slo);

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    if (!draft) return;
    const result = await save({ id: deployment.id, input: inputOf(draft, targets) }, { additionalTypenames: ['Deployment'] });
    if (result.data) setDraft(null);
  };

  return (
    <div data-testid="autoscaling">
      <TableScroll><table aria-label="Autoscaling settings">
        <tbody>
          <tr><th scope="row">Policy</th><td data-testid="scaling-policy">{POLICY_WORDS[deployment.scalingPolicy]}</td></tr>
          <tr><th scope="row">SLO</th><td data-testid="slo">{slo ?? 'No SLO'}</td></tr>
          <tr><th scope="row">Scale to zero</th><td>{deployment.scaleToZeroAfterSeconds == null
            ? 'Never: at least one replica (or the minimum) always runs'
            : `After ${deployment.scaleToZeroAfterSeconds.toLocaleString('en-US')} s without a request`}</td></tr>
          <tr><th scope="row">Cold-start queue</th><td>Up to {deployment.coldStartQueueLimit.toLocaleString('en-US')} requests per server wait for a first replica</td></tr>
        </tbody>
      </table></TableScroll>
      {editable && !draft && <p><button type="button" onClick={() => setDraft(draftOf(deployment))}>Edit autoscaling</button></p>}
      {draft && (
        <form onSubmit={submit} noValidate aria-label="Edit autoscaling" style={{ background: '#fff', padding: '8px 20px 20px', borderRadius: 8, border: '1px solid #dde1e6', margin: '12px 0' }}>
          <AutoscalingFields draft={draft} onChange={setDraft} targets={targets} error={saved.error} />
          <UnplacedError error={saved.error} params={AUTOSCALING_PARAMS} title="The autoscaling settings were not saved" />
          <p style={{ display: 'flex', gap: 8 }}>
            <button type="submit" disabled={saved.fetching}>{saved.fetching ? 'Saving…' : 'Save autoscaling'}</button>
            <button type="button" onClick={() => setDraft(null)}>Cancel</button>
          </p>
        </form>
      )}
      <h3>Over time</h3>
      <RangeButtons value={rangeKey} onChange={onRange} label="Autoscaling time range" />
      <AutoscalingHistory deploymentId={deployment.id} rangeKey={rangeKey} hasSlo={slo !== null} maxReplicas={deployment.maxReplicas} />
    </div>
  );
}
