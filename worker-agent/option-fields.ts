/**
 * Typed options read from command-line flags and environment variables (a flag wins over its
 * variable), validated with zod at boot. Loaders take `env` as a parameter so tests never
 * touch the real environment.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';

export interface OptionField<Schema extends z.ZodType = z.ZodType> {
  readonly schema: Schema;
  /** Environment variable that sets the option. */
  readonly env: string;
  /** Long flag without the leading dashes, for options worth setting on the command line. */
  readonly flag?: string;
  /** The flag is a switch (`--flag` alone means true); its variable still takes 1/true/yes/0/false/no. */
  readonly switch?: boolean;
}

export type OptionFields = Record<string, OptionField>;

export type OptionsOf<Fields extends OptionFields> = {
  readonly [Key in keyof Fields]: z.output<Fields[Key]['schema']>;
};

export function optionField<Schema extends z.ZodType>(schema: Schema, env: string, flag?: string): OptionField<Schema> {
  return { schema, env, flag };
}

/** A boolean option, false unless set, whose flag is a bare switch: `--flag` sets it; the variable takes 1/true/yes/0/false/no. */
export function switchField(env: string, flag: string) {
  return { schema: booleanOption().default(false), env, flag, switch: true } satisfies OptionField;
}

/** Thrown for any invalid flag or value; `main` prints it and exits with code 2. */
export class OptionsError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'OptionsError';
  }
}

export function loadOptionFields<Fields extends OptionFields>(
  what: string, fields: Fields, argv: readonly string[], env: NodeJS.ProcessEnv,
): OptionsOf<Fields> {
  const flags = parseFlags(what, fields, argv);
  const input: Record<string, string> = {};
  for (const [key, field] of Object.entries(fields)) {
    const flag = field.flag ? flags[field.flag] : undefined;
    const value = (typeof flag === 'boolean' ? String(flag) : flag) ?? env[field.env];
    if (value !== undefined && value !== '') input[key] = value;
  }
  const shape = Object.fromEntries(Object.entries(fields).map(([key, field]) => [key, field.schema]));
  const parsed = z.object(shape).safeParse(input);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const key = String(issue.path[0]);
      return `${describe(fields[key])}: ${input[key] === undefined ? 'is required' : issue.message}`;
    });
    throw new OptionsError(`invalid ${what} options: ${problems.join('; ')}`);
  }
  return Object.freeze(parsed.data) as OptionsOf<Fields>;
}

/** How a user names an option in an error message: `--flag / ENV_VAR`. */
export function describe(field: OptionField | undefined): string {
  if (!field) return 'options';
  return field.flag ? `--${field.flag} / ${field.env}` : field.env;
}

function parseFlags(what: string, fields: OptionFields, argv: readonly string[]): Record<string, string | boolean | undefined> {
  const flagOptions = Object.fromEntries(
    Object.values(fields).filter((field) => field.flag).map((field) => [field.flag as string, { type: field.switch ? 'boolean' as const : 'string' as const }]),
  );
  try {
    return parseArgs({ args: [...argv], options: flagOptions, strict: true, allowPositionals: false }).values as Record<string, string | boolean | undefined>;
  } catch (error) {
    throw new OptionsError(`invalid ${what} flags: ${(error as Error).message}`, { cause: error });
  }
}

/** Numbers from flags and env arrive as strings. */
export const integerOption = (minimum: number, maximum = Number.MAX_SAFE_INTEGER) =>
  z.coerce.number().int().min(minimum).max(maximum);

export const numberOption = (minimum: number) => z.coerce.number().min(minimum);

export const booleanOption = () => z.stringbool({ truthy: ['1', 'true', 'yes'], falsy: ['0', 'false', 'no'] });
