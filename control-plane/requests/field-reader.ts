import { AppError } from '../errors/app-error';
import { quoteValue, shortened } from '../errors/quote-value';

/**
 * Reads typed fields of a JSON body or a multipart form (where every value is a string) and
 * refuses bad ones with a 400 naming the field and what is allowed. Absent and empty-form
 * values count as not given.
 */
export class FieldReader {
  constructor(private readonly fields: Record<string, unknown>, private readonly fromForm: boolean) {}

  has(name: string): boolean {
    const value = this.fields[name];
    return value !== undefined && value !== null && !(this.fromForm && value === '');
  }

  string(name: string, options: { required?: boolean; maxLength?: number } = {}): string | undefined {
    if (!this.has(name)) {
      if (options.required) throw invalid(name, `${name} is required`);
      return undefined;
    }
    const value = this.fields[name];
    if (typeof value !== 'string') throw invalid(name, `${name} must be a string`);
    if (options.required && value.trim() === '') throw invalid(name, `${name} must not be empty`);
    const maxLength = options.maxLength ?? 32_000;
    if (value.length > maxLength) throw invalid(name, `${name} must be at most ${maxLength} characters`);
    return value;
  }

  integer(name: string, min: number, max: number): number | undefined {
    const value = this.number(name, `an integer from ${min} to ${max}`);
    if (value === undefined) return undefined;
    if (!Number.isInteger(value) || value < min || value > max) throw invalid(name, `${name} must be an integer from ${min} to ${max}, got ${quoteValue(this.fields[name])}`);
    return value;
  }

  decimal(name: string, min: number, max: number, options: { required?: boolean } = {}): number | undefined {
    if (!this.has(name) && options.required) throw invalid(name, `${name} is required: a number from ${min} to ${max}`);
    const value = this.number(name, `a number from ${min} to ${max}`);
    if (value === undefined) return undefined;
    if (value < min || value > max) throw invalid(name, `${name} must be a number from ${min} to ${max}, got ${quoteValue(this.fields[name])}`);
    return value;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[]): T | undefined {
    const value = this.string(name);
    if (value === undefined) return undefined;
    if (!allowed.includes(value as T)) throw invalid(name, `${name} must be one of ${allowed.map((item) => `'${item}'`).join(', ')}, got '${shortened(value)}'`);
    return value as T;
  }

  private number(name: string, allowed: string): number | undefined {
    if (!this.has(name)) return undefined;
    const raw = this.fields[name];
    const value = typeof raw === 'number' ? raw : this.fromForm && typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
    if (!Number.isFinite(value)) throw invalid(name, `${name} must be ${allowed}, got ${quoteValue(raw)}`);
    return value;
  }
}

export function invalid(param: string, message: string): AppError {
  return new AppError('invalid_request', message, { param });
}
