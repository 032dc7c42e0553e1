import { GraphQLSafeInt } from 'graphql-scalars';
import { Field, ID, Int, ObjectType, registerEnumType } from 'type-graphql';
import { DecimalScalar } from './decimal.scalar';

export enum EarningsGrouping {
  DAY = 'day',
  DEPLOYMENT = 'deployment',
}
registerEnumType(EarningsGrouping, { name: 'EarningsGrouping', description: 'DAY: UTC days (YYYY-MM-DD); DEPLOYMENT: the shared deployment' });

@ObjectType('LedgerEntry', { description: 'One movement of the workspace\'s money' })
export class LedgerEntryType {
  @Field({ description: 'gpu_time, top_up, guest_debit, owner_credit or opening_balance' }) kind: string;
  @Field(() => DecimalScalar, { description: 'Signed effect on the balance: negative for gpu_time and guest_debit' }) amount: string;
  @Field(() => String, { nullable: true, description: 'guest_debit and owner_credit: the shared model' }) modelId: string | null;
  @Field(() => ID, { nullable: true, description: 'gpu_time: the billed deployment; owner_credit: the shared deployment that served; never on guest_debit' })
  deploymentId: string | null;
  @Field(() => String, { nullable: true, description: 'The deployment\'s model id and slug, when the entry names a deployment' }) deploymentLabel: string | null;
  @Field(() => ID, { nullable: true, description: 'gpu_time: the billed replica' }) replicaId: string | null;
  @Field(() => Int, { nullable: true }) promptTokens: number | null;
  @Field(() => Int, { nullable: true }) completionTokens: number | null;
  @Field(() => DecimalScalar, { nullable: true, description: 'gpu_time: the offer\'s price per hour' }) pricePerHour: string | null;
  @Field(() => Date, { nullable: true, description: 'gpu_time: the metered period' }) periodStart: Date | null;
  @Field(() => Date, { nullable: true }) periodEnd: Date | null;
  @Field() createdAt: Date;
}

@ObjectType('SharingEarningsRow', { description: 'What guests paid for the workspace\'s shared deployments (100% goes to the owner)' })
export class SharingEarningsRowType {
  @Field({ description: 'YYYY-MM-DD (UTC) or deployment id' }) key: string;
  @Field(() => Int) requests: number;
  @Field(() => GraphQLSafeInt) promptTokens: number;
  @Field(() => GraphQLSafeInt) completionTokens: number;
  @Field(() => DecimalScalar) earnings: string;
}
