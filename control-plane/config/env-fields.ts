import { z } from 'zod';

/** Env values arrive as strings; these coerce and name the variable in the error. */
export const intField = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce.number().int().min(min).max(max);
export const boolField = () =>
  z.enum(['true', 'false', '1', '0', 'yes', 'no']).transform((value) => ['true', '1', 'yes'].includes(value));

/** A setting the server refuses (its message names the variable): `main` exits 2 on it, not 1. */
export class ConfigError extends Error {}

/** Parses `env` with `shape`, mapping each field to its env var; throws one readable error. */
export function loadEnv<T extends z.ZodRawShape>(
  what: string, shape: T, names: Record<keyof T, string>, env: NodeJS.ProcessEnv,
): Readonly<z.infer<z.ZodObject<T>>> {
  const input: Record<string, string | undefined> = {};
  for (const key of Object.keys(shape)) {
    const value = env[names[key as keyof T]];
    if (value !== undefined && value !== '') input[key] = value;
  }
  const parsed = z.object(shape).safeParse(input);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${names[issue.path[0] as keyof T] ?? issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`invalid ${what} configuration: ${problems.join('; ')}`);
  }
  return Object.freeze(parsed.data);
}

/**
 * A module's settings reader: loadEnv of its `shape` under its env `names`, reading process.env
 * unless given another env (tests never touch process.env).
 */
export function envReader<T extends z.ZodRawShape>(what: string, shape: T, names: Record<keyof T, string>) {
  return (env: NodeJS.ProcessEnv = process.env) => loadEnv(what, shape, names, env);
}
