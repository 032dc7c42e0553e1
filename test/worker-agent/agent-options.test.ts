import { loadAgentOptions } from '../../worker-agent/agent-options';
import { createEngine } from '../../worker-agent/create-engine';
import { OptionsError } from '../../worker-agent/option-fields';
import { parseGpuList } from '../../worker-agent/gpu-inventory';
import { Backoff } from '../../worker-agent/backoff';

const required = { WORKER_CONTROL_PLANE: '127.0.0.1:50051', WORKER_JOIN_TOKEN: 'jt_1' };

describe('loadAgentOptions', () => {
  test('fills documented defaults', () => {
    const options = loadAgentOptions([], required);
    expect(options).toMatchObject({
      controlPlaneAddress: '127.0.0.1:50051', joinToken: 'jt_1', engineKind: 'cpu', maxConcurrency: 64,
      reconnectInitialMs: 250, reconnectMaxMs: 10_000, drainTimeoutMs: 30_000, gpus: [],
      keepaliveIntervalMs: 30_000, keepaliveTimeoutMs: 10_000,
      cpuTtftMs: 0, cpuTokensPerSecond: 0, cpuTestControls: false,
      // Agents on GPU hosts outlive their control plane and reconnect; only the local provider sets it.
      exitWithParent: false,
    });
    expect(options.agentId).toMatch(/^agt_[0-9a-f]{16}$/);
    expect(Object.isFrozen(options)).toBe(true);
    expect(options.cpuFailAfterTokens).toBeUndefined();
    expect(options.cpuCrashAfterTokens).toBeUndefined();
  });

  test('flags win over environment variables', () => {
    const options = loadAgentOptions(
      ['--control-plane', 'cp:1', '--engine', 'openai', '--engine-url', 'http://gpu:8000/v1', '--max-concurrency', '8', '--agent-id', 'agt_a'],
      { ...required, WORKER_MAX_CONCURRENCY: '2', WORKER_ENGINE_MODEL: 'served', WORKER_CPU_TEST_CONTROLS: '1', WORKER_GPUS: 'H100:80' },
    );
    expect(options).toMatchObject({
      controlPlaneAddress: 'cp:1', engineKind: 'openai', engineUrl: 'http://gpu:8000/v1', maxConcurrency: 8,
      agentId: 'agt_a', engineModel: 'served', cpuTestControls: true,
      gpus: [{ name: 'H100', memoryBytes: 80 * 1024 ** 3, index: 0 }],
    });
  });

  test('reads the engine metrics path, /metrics unless set, off to read none', () => {
    expect(loadAgentOptions([], required).engineMetricsPath).toBe('/metrics');
    expect(loadAgentOptions([], { ...required, WORKER_ENGINE_METRICS_PATH: 'off' }).engineMetricsPath).toBe('off');
    expect(loadAgentOptions(['--engine-metrics-path', '/engine/metrics'], required).engineMetricsPath).toBe('/engine/metrics');
  });

  test('reads the LoRA adapter options: no host-memory tier, rank 64 and a 150 ms simulated load unless set', () => {
    expect(loadAgentOptions([], required)).toMatchObject({ maxCpuLoras: 0, maxLoraRank: 64, cpuLoraLoadMs: 150 });
    expect(loadAgentOptions([], required).maxLoras).toBeUndefined();
    expect(loadAgentOptions([], required).adapterDir).toBeUndefined();
    expect(loadAgentOptions(['--max-loras', '0', '--max-cpu-loras', '8', '--max-lora-rank', '16', '--adapter-dir', '/var/adapters', '--cpu-lora-load-ms', '5'], required))
      .toMatchObject({ maxLoras: 0, maxCpuLoras: 8, maxLoraRank: 16, adapterDir: '/var/adapters', cpuLoraLoadMs: 5 });
    expect(loadAgentOptions([], { ...required, WORKER_MAX_LORAS: '2', WORKER_MAX_CPU_LORAS: '3', WORKER_MAX_LORA_RANK: '256', WORKER_ADAPTER_DIR: '/a', WORKER_CPU_LORA_LOAD_MS: '0' }))
      .toMatchObject({ maxLoras: 2, maxCpuLoras: 3, maxLoraRank: 256, adapterDir: '/a', cpuLoraLoadMs: 0 });
  });

  test('offers 4 adapter slots on the built-in engines unless set, and none on an openai engine unless the operator says its engine has them', () => {
    const slots = (argv: string[]) => createEngine(loadAgentOptions(argv, required)).adapters?.capacity.maxLoras ?? 0;
    expect(slots([])).toBe(4);
    expect(slots(['--max-loras', '0'])).toBe(0);
    // vLLM started without --enable-lora would answer every adapter job with an error: no slots unless said.
    expect(slots(['--engine', 'openai', '--engine-url', 'http://127.0.0.1:9'])).toBe(0);
    expect(slots(['--engine', 'openai', '--engine-url', 'http://127.0.0.1:9', '--max-loras', '8'])).toBe(8);
  });

  test.each([
    [['--max-loras=-1'], required, /--max-loras \/ WORKER_MAX_LORAS:/],
    [[], { ...required, WORKER_MAX_CPU_LORAS: 'many' }, /--max-cpu-loras \/ WORKER_MAX_CPU_LORAS:/],
    [['--max-lora-rank', '12'], required, /--max-lora-rank \/ WORKER_MAX_LORA_RANK: must be one of 8, 16, 32, 64, 128, 256/],
    [['--cpu-lora-load-ms', '1.5'], required, /--cpu-lora-load-ms \/ WORKER_CPU_LORA_LOAD_MS:/],
    [[], { ...required, WORKER_ADAPTER_DIR: '' , WORKER_MAX_LORAS: '2000' }, /WORKER_MAX_LORAS:/],
  ])('rejects the adapter options %j %j naming the option', (argv, env, message) => {
    expect(() => loadAgentOptions(argv, env)).toThrow(message);
  });

  test.each([
    [[], {}, /--control-plane \/ WORKER_CONTROL_PLANE: is required/],
    [['--engine', 'openai'], required, /--engine-url \/ WORKER_ENGINE_URL is required/],
    [['--engine', 'tpu'], required, /--engine \/ WORKER_ENGINE/],
    [['--max-concurrency', '0'], required, /WORKER_MAX_CONCURRENCY/],
    [['--nope', 'x'], required, /Unknown option '--nope'/],
    [[], { ...required, WORKER_GPUS: 'no-memory' }, /WORKER_GPUS: must be JSON/],
    [[], { ...required, WORKER_RECONNECT_INITIAL_MS: '500', WORKER_RECONNECT_MAX_MS: '100' }, /WORKER_RECONNECT_MAX_MS must be >=/],
    [['--engine-metrics-path', 'metrics'], required, /--engine-metrics-path \/ WORKER_ENGINE_METRICS_PATH: must be a path such as \/metrics, or off/],
  ])('rejects %j %j with a clear error', (argv, env, message) => {
    expect(() => loadAgentOptions(argv, env)).toThrow(OptionsError);
    expect(() => loadAgentOptions(argv, env)).toThrow(message);
  });
});

describe('parseGpuList', () => {
  test('reads JSON and the short form', () => {
    expect(parseGpuList('[{"name":"A100","memoryGiB":40,"index":3}]')).toEqual([{ name: 'A100', memoryBytes: 40 * 1024 ** 3, index: 3 }]);
    expect(parseGpuList('NVIDIA H100 80GB HBM3:80, L4:24')).toEqual([
      { name: 'NVIDIA H100 80GB HBM3', memoryBytes: 80 * 1024 ** 3, index: 0 },
      { name: 'L4', memoryBytes: 24 * 1024 ** 3, index: 1 },
    ]);
    expect(parseGpuList('[{"name":1}]')).toBeUndefined();
  });
});

describe('Backoff', () => {
  test('doubles its ceiling up to the cap, with full jitter, and resets', () => {
    const ceilings = new Backoff(100, 1_000, () => 0.999999);
    expect(Array.from({ length: 6 }, () => ceilings.nextDelayMs())).toEqual([99, 199, 399, 799, 999, 999]);
    ceilings.reset();
    expect(ceilings.nextDelayMs()).toBe(99);
    expect(new Backoff(100, 1_000, () => 0).nextDelayMs()).toBe(0);
  });
});
