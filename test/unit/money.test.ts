import { canonicalMoney, isPositive, parseDecimal, parseTopUp } from '../../control-plane/billing/money';
import { AppError } from '../../control-plane/errors/app-error';

describe('money as decimal strings', () => {
  it('reads strings and numbers into canonical decimals without a float in between', () => {
    expect(parseTopUp('0.1', 'amount')).toBe('0.1');
    expect(parseTopUp(0.1, 'amount')).toBe('0.1');
    expect(parseTopUp(' 12.50 ', 'amount')).toBe('12.5');
    expect(parseTopUp('007', 'amount')).toBe('7');
    expect(parseTopUp('.5', 'amount')).toBe('0.5');
    expect(parseTopUp('5.', 'amount')).toBe('5');
    expect(parseTopUp('+3', 'amount')).toBe('3');
    expect(parseTopUp('1.8e-7', 'amount')).toBe('0.00000018');
    expect(parseTopUp(1e-7, 'amount')).toBe('0.0000001');
    expect(parseTopUp('1E6', 'amount')).toBe('1000000');
    expect(parseTopUp('0.0000000001', 'amount')).toBe('0.0000000001');
    expect(parseTopUp('999999.9999999999', 'amount')).toBe('999999.9999999999');
    expect(parseDecimal('0', 'creditBalance', { min: 'non-negative', max: '10' })).toBe('0');
    expect(parseDecimal('-0', 'creditBalance', { min: 'non-negative', max: '10' })).toBe('0');
  });

  it('refuses what is not a decimal in range, naming the argument', () => {
    const refused = ['0', '-1', '-0.0000000001', '1000000.0000000001', '1e7', '0.00000000001', 'NaN', 'Infinity', '', '.', 'e5', '1e', '0x10', '1,5', '1 000',
      NaN, Infinity, -Infinity, null, undefined, true, {}, [], '9'.repeat(80)];
    for (const value of refused) {
      let error: unknown;
      try {
        parseTopUp(value, 'amount');
      } catch (caught) {
        error = caught;
      }
      expect({ value, code: (error as AppError)?.code, param: (error as AppError)?.param }).toEqual({ value, code: 'invalid_request', param: 'amount' });
    }
    expect(() => parseDecimal('0.12345', 'inputPerMillion', { min: 'non-negative', max: '100', scale: 4 })).toThrow(/inputPerMillion must be a decimal from 0 up to 100 with at most 4 decimal places, got "0.12345"/);
  });

  it('trims numeric text from PostgreSQL and tells its sign', () => {
    expect(canonicalMoney('100.0000000000')).toBe('100');
    expect(canonicalMoney('-0.0000001800')).toBe('-0.00000018');
    expect(canonicalMoney('-0.0000000000')).toBe('0');
    expect(canonicalMoney('0.3000000000')).toBe('0.3');
    expect(canonicalMoney('12')).toBe('12');
    expect([isPositive('0.0000000001'), isPositive('0.0000000000'), isPositive('-5.0000000000'), isPositive('0')]).toEqual([true, false, false, false]);
  });
});
