-- POSTs the benchmark body and prints one JSON line of results at the end.
-- Env: BENCH_KEY (bearer), BENCH_STREAM (1 for stream: true), BENCH_CHUNKS.
local key = os.getenv("BENCH_KEY") or "none"
local stream = os.getenv("BENCH_STREAM") == "1"
local chunks = os.getenv("BENCH_CHUNKS") or "20"
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. key
wrk.body = '{"model":"meta-llama/Llama-3.1-8B-Instruct","messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":16'
  .. (stream and (',"stream":true,"bench_chunks":' .. chunks) or '') .. '}'

function done(summary, latency, requests)
  io.write(string.format('{"requests":%d,"duration_us":%d,"non2xx":%d,"socket_errors":%d,"p50_us":%d,"p99_us":%d,"mean_us":%f}\n',
    summary.requests, summary.duration, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), latency.mean))
end
