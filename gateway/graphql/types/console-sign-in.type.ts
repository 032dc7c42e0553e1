import { Field, ID, ObjectType } from 'type-graphql';

@ObjectType({ description: 'What a console sign-in link is exchanged for: a new workspace API key (named "console sign-in"), shown this once' })
export class ConsoleSignIn {
  @Field(() => ID) workspaceId: string;
  @Field({ description: 'mk-… plaintext of the new key; the console keeps it in the tab\'s session storage' }) apiKey: string;
}
