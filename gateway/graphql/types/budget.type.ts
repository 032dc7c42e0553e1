import { Field, Float, ObjectType } from 'type-graphql';

@ObjectType('Budget', { description: 'One limit of the tenant budget as a workspace has it (docs/tenant-budget.md)' })
export class BudgetType {
  @Field({ description: 'connections, requests, memory, sockets, subscriptions, graphql_operations, graphql_cost, stored_bytes, stored_files, active_batches, deployments or local_replicas' })
  budget: string;
  @Field({ description: 'Who the limit applies to: key (each API key), workspace, server (each server; for local_replicas this host), address (a client IP before it shows a key) or socket (one graphql-ws connection)' })
  scope: string;
  @Field({ description: 'What is counted' }) counts: string;
  @Field({ description: 'count or bytes' }) unit: string;
  @Field({ description: 'held: counted while something lasts, on each server; stored: counted from what the workspace keeps' }) kind: string;
  @Field(() => Float, { description: 'The limit in force' }) limit: number;
  @Field(() => Float, { name: 'default', description: 'The server\'s default for this scope' }) defaultLimit: number;
  @Field({ description: 'Set by the operator for this workspace (setWorkspaceBudget)' }) overridden: boolean;
  @Field(() => Float, { nullable: true, description: 'Held budgets, workspace scope: what the workspace holds on the server that answered; null for other scopes and stored budgets' })
  heldOnThisServer: number | null;
}
