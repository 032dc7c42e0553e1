/**
 * Type helpers that turn the generated message types (proto/generated, `npm run gen:proto`)
 * into the shapes the code reads and writes. Types only: proto/ holds no logic.
 */

/** `T` with `O`'s fields in place of its own (a nested message in this repo's shape rather than the generated one). */
export type Override<T, O extends { [K in keyof T]?: unknown }> = Omit<T, keyof O> & O;

/** Decoded message `T` whose fields `K` a sender may leave unset (a receiver still gets their default from the loader). */
export type Unset<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;

/** A oneof envelope as the loader decodes it (`oneofs: true`): the set member is present, the others absent, never null. */
export type Members<T> = { [K in keyof T]: Exclude<T[K], null> };

/** A oneof envelope as a union of its cases: the discriminator `D` names the member, which is then present. */
export type Cases<T, D extends keyof T> = {
  [M in MemberOf<T, D>]: Omit<T, D | MemberOf<T, D>> & { [P in D]: M } & { [P in M]: NonNullable<T[M]> };
}[MemberOf<T, D>];

type MemberOf<T, D extends keyof T> = Extract<NonNullable<T[D]>, keyof T>;
