import { Field, ID, Int, ObjectType } from 'type-graphql';

@ObjectType('ReplicaLogLine', {
  description: 'A line a replica\'s agent or engine printed, scrubbed of addresses, paths and secrets (docs/console.md, "Replica logs")',
})
export class ReplicaLogLineType {
  @Field(() => ID) replicaId: string;
  @Field(() => ID) deploymentId: string;
  @Field(() => Int, { description: 'Increasing per replica where its agent is connected: skip lines already read from the backlog' }) seq: number;
  @Field() at: Date;
  @Field({ description: 'debug, info, warn or error' }) level: string;
  @Field({ description: 'agent (the worker agent\'s own lines) or engine (its engine\'s lines and native output)' }) source: string;
  @Field() message: string;
}
