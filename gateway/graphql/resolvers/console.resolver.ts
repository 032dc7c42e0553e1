import { Arg, Mutation, Resolver } from 'type-graphql';
import type { ControlPlane } from '../../../control-plane/main';
import { ConsoleSignIn } from '../types/console-sign-in.type';

/** The console's one way in without a key: a one-time sign-in link (no Authorization needed). */
@Resolver()
export class ConsoleResolver {
  constructor(private readonly controlPlane: ControlPlane) {}

  @Mutation(() => ConsoleSignIn, { description: 'Spends a one-time console sign-in link (printed by `npm start`); UNAUTHENTICATED when it is unknown, used or expired' })
  async redeemSignInLink(@Arg('token') token: string): Promise<ConsoleSignIn> {
    return await this.controlPlane.signInLinks.redeem(token);
  }
}
