import { Arg, Ctx, Mutation, Resolver } from 'type-graphql';
import { AppError } from '../../../control-plane/api/errors';
import type { AdminPort } from '../../../control-plane/api/admin';
import type { GraphQLContext } from '../graphql-context';
import { withHttpStatus } from '../graphql-errors';
import { ConsoleSignIn } from '../types/console-sign-in.type';

/** The console's one way in without a key: a one-time sign-in link (no Authorization needed). */
@Resolver()
export class ConsoleResolver {
  constructor(private readonly admin: Pick<AdminPort, 'signInLinks'>) {}

  @Mutation(() => ConsoleSignIn, { description: 'Spends a one-time console sign-in link (printed by `npm start`); UNAUTHENTICATED when it is unknown, used or expired, RATE_LIMITED (HTTP 429, Retry-After) past CONSOLE_SIGN_IN_PER_CLIENT_PER_MINUTE or CONSOLE_SIGN_IN_PER_SERVER_PER_MINUTE' })
  async redeemSignInLink(@Arg('token') token: string, @Ctx() context: GraphQLContext): Promise<ConsoleSignIn> {
    try {
      return await this.admin.signInLinks.redeem(token, context.clientAddress);
    } catch (error) {
      // A throttled client is told when to come back the HTTP way too: status 429 and Retry-After.
      if (error instanceof AppError && error.code === 'rate_limit_error') throw withHttpStatus(error);
      throw error;
    }
  }
}
