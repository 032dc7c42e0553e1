import type { CatalogModel } from '../../../control-plane/api/inference';
import { Field, Float, Int, ObjectType } from 'type-graphql';

@ObjectType({ description: 'Native clip spec of a video model with a pinned spec' })
export class VideoSpecType {
  @Field(() => Float) durationSeconds: number;
  @Field(() => Int) fps: number;
}

@ObjectType({ description: 'Vectors and limits of an embedding model' })
export class EmbeddingSpecType {
  @Field(() => Int, { description: 'Length of the vectors the model returns' }) dimensions: number;
  @Field(() => Int, { description: 'Tokens one input may hold; longer inputs are refused, never truncated' }) maxInputTokens: number;
  @Field(() => Int, { nullable: true, description: 'Matryoshka models: the smallest `dimensions` a request may ask for; null when the field is refused' }) minDimensions?: number;
  @Field(() => Int, { description: 'Inputs one engine call embeds; larger requests are split into jobs of this size' }) maxBatchInputs: number;
}

@ObjectType('CatalogModel', { description: 'A model that deployments can be created from' })
export class CatalogModelType {
  @Field() id: string;
  @Field() name: string;
  @Field({ description: 'text, image or video' }) modality: string;
  @Field({ description: 'chat, completion, embedding, image-generation, image-edit or video-generation' }) task: string;
  @Field() engine: string;
  @Field() official: boolean;
  @Field(() => Float) gpuMemoryGb: number;
  @Field(() => [String]) inputModalities: string[];
  @Field(() => [String], { description: 'WIDTHxHEIGHT sizes or resolutions; empty for text models' }) sizes: string[];
  @Field(() => VideoSpecType, { nullable: true }) videoSpec?: VideoSpecType;
  @Field(() => EmbeddingSpecType, { nullable: true, description: 'Embedding models only' }) embedding?: EmbeddingSpecType;
  @Field(() => Int) targetConcurrency: number;
}

/** A catalog entry as GraphQL returns it (its readonly lists copied into the mutable arrays the type declares). */
export function toCatalogModelType(model: CatalogModel): CatalogModelType {
  return { ...model, inputModalities: [...model.inputModalities], sizes: [...model.sizes] };
}
