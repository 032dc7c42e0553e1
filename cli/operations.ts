/**
 * Every GraphQL document the CLI sends, in one place, so a unit test validates them all against
 * schema.graphql (test/unit/cli-operations.test.ts): a field renamed on the server fails there,
 * not at a user's prompt.
 */
const WORKSPACE_FIELDS = 'id name creditBalance createdAt deletedAt';
const KEY_FIELDS = 'id name displayPrefix rpmLimit tpdLimit createdAt regeneratedAt';
export const DEPLOYMENT_FIELDS = 'id slug modelId status statusReason provider minReplicas maxReplicas desiredReplicas autoscale priceCapPerHour '
  + 'routingPolicy baseUrl createdAt updatedAt';
const DECISION_FIELDS = 'decidedAt action reason explanation signal targetConcurrency currentReplicas wantedReplicas desiredReplicas';
const BATCH_FIELDS = 'id deploymentId endpoint model status completionWindow inputFileId outputFileId errorFileId '
  + 'requestCounts { total completed failed } usage { inputTokens cachedTokens outputTokens totalTokens } errors { code message param line } '
  + 'metadata createdAt expiresAt inProgressAt finalizingAt completedAt failedAt expiredAt cancellingAt cancelledAt';

export const OPERATIONS = {
  // Operator (OPERATOR_TOKEN).
  createWorkspace: `mutation($name: String!, $creditBalance: Decimal) {
    createWorkspace(name: $name, creditBalance: $creditBalance) { workspace { ${WORKSPACE_FIELDS} } apiKey { id name displayPrefix } plaintext } }`,
  setLocalReplicas: `mutation($workspaceId: ID!, $value: Float) {
    setWorkspaceBudget(workspaceId: $workspaceId, budget: "local_replicas", scope: "workspace", value: $value) { budget scope limit } }`,
  workspaces: `query($includeDeleted: Boolean!) { workspaces(includeDeleted: $includeDeleted) { ${WORKSPACE_FIELDS} } }`,
  // A workspace (PLATFORM_API_KEY).
  createApiKey: `mutation($input: CreateApiKeyInput!) { createApiKey(input: $input) { apiKey { ${KEY_FIELDS} } plaintext } }`,
  apiKeys: `query { apiKeys { ${KEY_FIELDS} } }`,
  revokeApiKey: `mutation($id: ID!) { revokeApiKey(id: $id) { ${KEY_FIELDS} } }`,
  deployments: `query { deployments { ${DEPLOYMENT_FIELDS} } }`,
  deployment: `query($id: ID!, $limit: Int!) { deployment(id: $id) { ${DEPLOYMENT_FIELDS}
    replicas { id status statusReason provider engineKind createdAt terminatedAt } scalingDecisions(limit: $limit) { ${DECISION_FIELDS} } } }`,
  deploymentEvents: `query($id: ID!, $limit: Int!) { deployment(id: $id) { ${DEPLOYMENT_FIELDS} scalingDecisions(limit: $limit) { ${DECISION_FIELDS} } } }`,
  deploymentUpdated: `subscription { deploymentUpdated { ${DEPLOYMENT_FIELDS} } }`,
  createDeployment: `mutation($input: CreateDeploymentInput!) { createDeployment(input: $input) { deployment { ${DEPLOYMENT_FIELDS} } joinToken } }`,
  updateDeployment: `mutation($id: ID!, $input: UpdateDeploymentInput!) { updateDeployment(id: $id, input: $input) { ${DEPLOYMENT_FIELDS} } }`,
  pauseDeployment: `mutation($id: ID!) { pauseDeployment(id: $id) { ${DEPLOYMENT_FIELDS} } }`,
  resumeDeployment: `mutation($id: ID!) { resumeDeployment(id: $id) { ${DEPLOYMENT_FIELDS} } }`,
  deleteDeployment: `mutation($id: ID!) { deleteDeployment(id: $id) { ${DEPLOYMENT_FIELDS} } }`,
  batch: `query($id: ID!) { batch(id: $id) { ${BATCH_FIELDS} } }`,
} as const;
