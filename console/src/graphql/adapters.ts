import { graphql } from '../gql';

/** What the console shows of an adapter, the same whether read or pushed (`adapterUpdated`). */
export const ADAPTER_PARTS = graphql(`
  fragment AdapterParts on Adapter {
    id name baseModel rank format source revision sha256 sizeBytes sharedWithGuests deleted createdAt updatedAt
    deployments { id name }
    residency { replicaId deploymentId revision state loadMs error lastUsedAt }
  }
`);

export const ATTACH_ADAPTER = graphql(`
  mutation AttachAdapter($adapterId: ID!, $deploymentId: ID!) { attachAdapter(adapterId: $adapterId, deploymentId: $deploymentId) { ...AdapterParts } }
`);

export const DETACH_ADAPTER = graphql(`
  mutation DetachAdapter($adapterId: ID!, $deploymentId: ID!) { detachAdapter(adapterId: $adapterId, deploymentId: $deploymentId) { ...AdapterParts } }
`);

/** Re-read lists of adapters after any change of one; module-level, so urql sees one stable context. */
export const ADAPTER_CONTEXT = { additionalTypenames: ['Adapter'] };
