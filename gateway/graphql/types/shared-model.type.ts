import { Field, ID, Int, ObjectType } from 'type-graphql';

@ObjectType('SharedModel', { description: 'A model of shared serving as guests see it: per-token prices and live availability' })
export class SharedModelType {
  @Field(() => ID, { description: 'The id guests call it by: shared/<model-id>' }) id: string;
  @Field({ description: 'The catalog model id' }) modelId: string;
  @Field({ description: 'USD per 1M input (prompt) tokens, an exact decimal' }) inputPricePerMillion: string;
  @Field({ description: 'USD per 1M output (completion) tokens, an exact decimal' }) outputPricePerMillion: string;
  @Field({
    description: 'Available; Degraded (slower but succeeding: no idle guest slot now, over 20 % of the last minute\'s guest requests refused, '
      + 'or their median time to first token above twice the pool\'s baseline); Unavailable (no provider is left)',
  }) availability: string;
  @Field(() => Int, { description: 'Guest slots free now, over every provider\'s replicas' }) idleGuestSlots: number;
}
