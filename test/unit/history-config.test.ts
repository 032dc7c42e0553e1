import { ConfigError } from '../../control-plane/config/env-fields';
import { loadMetricsHistoryConfig } from '../../control-plane/metrics-history/metrics-history-config';
import { loadRequestLogConfig } from '../../control-plane/request-log/request-log-config';

describe('metrics history and request log settings', () => {
  it('default to 30 days of history and log, a write a minute and a second, 32 KiB bodies', () => {
    expect(loadMetricsHistoryConfig({})).toEqual({ retentionDays: 30, flushIntervalMs: 60_000, sweepIntervalMs: 600_000 });
    expect(loadRequestLogConfig({})).toEqual({ retentionDays: 30, flushIntervalMs: 1_000, bodyMaxBytes: 32_768, sweepIntervalMs: 60_000 });
    expect(loadMetricsHistoryConfig({ METRICS_HISTORY_RETENTION_DAYS: '7' }).retentionDays).toBe(7);
  });

  test.each([
    [loadMetricsHistoryConfig, 'METRICS_HISTORY_RETENTION_DAYS', 'soon'],
    [loadMetricsHistoryConfig, 'METRICS_HISTORY_RETENTION_DAYS', '0'],
    [loadMetricsHistoryConfig, 'METRICS_HISTORY_FLUSH_INTERVAL_MS', '5'],
    [loadRequestLogConfig, 'REQUEST_LOG_RETENTION_DAYS', '-1'],
    [loadRequestLogConfig, 'REQUEST_LOG_BODY_MAX_BYTES', '1.5'],
  ])('a bad value is a ConfigError naming its variable (%#: %s=%s)', (load, name, value) => {
    expect(() => load({ [name]: value })).toThrow(ConfigError);
    expect(() => load({ [name]: value })).toThrow(name);
  });
});
