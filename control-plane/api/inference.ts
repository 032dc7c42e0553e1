/**
 * The inference port (docs/layers.md#the-door): what the request path of `/v1` and `/shared/v1`
 * calls (authenticate a key, resolve a deployment or shared model, screen and admit, run text,
 * embeddings and responses turns, submit media), and the types it speaks: keys, deployments,
 * jobs, the OpenAI request model (parsing, endpoints), budgets.
 */
import type { AdapterDirectory } from '../adapters/adapter-directory';
import type { ApiKeyService } from '../api-keys/api-key.service';
import type { TenantBudget } from '../budgets/tenant-budget';
import type { TenantQueries } from '../database/tenant-queries';
import type { DeploymentStore } from '../deployments/deployment-store';
import type { ControlPlane } from '../main';
import type { InferencePipeline } from '../pipeline/inference-pipeline';
import type { RequestService } from '../requests/request-service';
import type { BackgroundResponses } from '../responses/background-responses';
import type { ResponsesService } from '../responses/responses-service';
import type { SharedServing } from '../sharing/shared-serving';
import type { Metrics } from '../telemetry/metrics';

/**
 * The request path. Each member is the started control plane's own service (no wrapper, no
 * per-request indirection), typed down to the calls the gateway makes: `apiKeys` authenticates,
 * `deploymentStore` resolves a workspace's deployments, `pipeline` resolves, screens, admits and
 * runs (text, embeddings, media submit), `shared` lists shared models, `responses` and
 * `backgroundResponses` run Responses turns, `requests` reads and cancels media requests,
 * `budget` holds what a request holds while it lasts, `tenantQueries` runs a tenant's queries on
 * the tenant pool, `metrics` records requests, `replicas` and `localProvider` tell the engines a
 * deployment serves (`/models`).
 */
export interface InferencePort {
  readonly apiKeys: Pick<ApiKeyService, 'authenticate' | 'authenticateNow'>;
  readonly deploymentStore: Pick<DeploymentStore, 'listOfWorkspace'>;
  readonly pipeline: Pick<InferencePipeline,
    'deployment' | 'refusalBeforeBody' | 'runText' | 'runEmbeddings' | 'embeddingModel' | 'mediaModel' | 'submitMedia' | 'runMedia'
    | 'runShared' | 'screenShared'>;
  readonly shared: Pick<SharedServing, 'models' | 'model'>;
  readonly responses: Pick<ResponsesService, 'begin' | 'beginShared' | 'run' | 'running' | 'end'>;
  readonly backgroundResponses: Pick<BackgroundResponses, 'create' | 'options'>;
  readonly requests: Pick<RequestService, 'get' | 'list' | 'cancel' | 'outputUrls'>;
  readonly budget: TenantBudget;
  readonly tenantQueries: TenantQueries;
  readonly metrics: Pick<Metrics, 'recordRequest'>;
  readonly replicas: ControlPlane['replicas'];
  readonly localProvider: ControlPlane['localProvider'];
  /** LoRA adapters by name: the single base URL's routing and `GET /v1/models` (docs/adapters.md). */
  readonly adapterDirectory: Pick<AdapterDirectory, 'deploymentFor' | 'listed'>;
}

export type { ApiKeyService, AuthenticatedKey } from '../api-keys/api-key.service';
export type { Deployment, ProviderKind } from '../deployments/deployment.entity';
export type { DeploymentStore } from '../deployments/deployment-store';
export type { AdapterDirectory, ListedAdapter } from '../adapters/adapter-directory';
export { pickDeployment } from '../deployments/workspace-model';
export type { CatalogModel } from '../catalog/catalog';
export type { Job, JobFailure, JobListener } from '../dispatch/job';
export type { InferencePipeline, RequestTrace } from '../pipeline/inference-pipeline';
export type { WorkTicket } from '../pipeline/work-ticket';
export type { FanOutSink, JobDispatch, JobSink, RunSummary } from '../pipeline/job-sink';
export type { RateLimitDecision } from '../rate-limits/rate-limit-decision';
export type { BudgetHolder, BudgetLease, TenantBudget } from '../budgets/tenant-budget';
export type { TenantQueries } from '../database/tenant-queries';
export { parseJson, parseJsonObject } from '../openai/json-body';
export { parseTextRequest } from '../openai/text-request';
export type { TextEndpoint } from '../openai/text-request';
export { parseEmbeddingsRequest } from '../openai/embeddings-request';
export { EmbeddingBatches, splitEmbeddingsRequest } from '../openai/embedding-batches';
export { parseResponsesRequest } from '../openai/responses-request';
export { INFERENCE_ENDPOINTS, servedEndpoints } from '../openai/inference-endpoints';
export type { InferenceEndpointName } from '../openai/inference-endpoints';
export { SHARED_MODEL_PREFIX } from '../sharing/shared-serving';
export type { SharedServing } from '../sharing/shared-serving';
export type { PricedModel, SharedModel } from '../sharing/shared-pool';
export { ChatStreamTranslator, chatAnswerToResult, statusOf, usageOf } from '../responses/chat-to-response';
export type { StreamEvent } from '../responses/chat-to-response';
export type { ResponsesRequest, ResponseUsage } from '../responses/response-items';
export { SHARED_SCOPE, WORKSPACE_SCOPE } from '../responses/response-scope';
export type { ResponseScope } from '../responses/response-scope';
export type { ResponsesService, ResponseTurn, TurnEnd, TurnLimits } from '../responses/responses-service';
export { FieldReader } from '../requests/field-reader';
export { readDelivery, readImageParams } from '../requests/image-params';
export { readVideoParams } from '../requests/video-params';
export type { VideoRoute } from '../requests/video-params';
export type { MediaSubmission } from '../requests/request-service';
