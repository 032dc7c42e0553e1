import { asAppError, isDatabaseUnavailable } from '../../control-plane/database/database-unavailable';
import { AppError } from '../../control-plane/errors/app-error';
import { renderError } from '../../gateway/errors/error-response';

describe('database unavailable → 503', () => {
  it('recognises a refused connection, a restarting server and a dropped connection, also wrapped', () => {
    expect(isDatabaseUnavailable(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('the database system is starting up'), { code: '57P03' }))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('database "test_1" is not currently accepting connections'), { code: '55000' }))).toBe(true);
    // TypeORM's QueryFailedError keeps the driver's error.
    expect(isDatabaseUnavailable({ message: 'query failed', driverError: { code: '08006', message: 'connection failure' } })).toBe(true);
    expect(isDatabaseUnavailable(new Error('outer', { cause: Object.assign(new Error('reset'), { code: 'ECONNRESET' }) }))).toBe(true);
  });

  it('leaves real bugs and bad queries as they are', () => {
    expect(isDatabaseUnavailable(Object.assign(new Error('syntax error at or near "SELEC"'), { code: '42601' }))).toBe(false);
    expect(isDatabaseUnavailable(new TypeError('cannot read properties of undefined'))).toBe(false);
    expect(asAppError(new TypeError('x')).code).toBe('internal_error');
    const kept = new AppError('invalid_request', 'bad', { param: 'x' });
    expect(asAppError(kept)).toBe(kept);
  });

  it('renders as 503 with the OpenAI body and Retry-After, never a 500', () => {
    const rendered = renderError(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }));
    expect(rendered.status).toBe(503);
    expect(rendered.headers['retry-after']).toBe('2');
    const body = JSON.parse(rendered.body.toString());
    expect(body.error).toMatchObject({ code: 'service_unavailable', type: 'service_unavailable_error', param: null });
    expect(body.error.message).not.toMatch(/127\.0\.0\.1|5432|ECONNREFUSED/);
  });
});
