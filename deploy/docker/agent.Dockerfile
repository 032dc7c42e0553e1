# syntax=docker/dockerfile:1
# The worker agent (docs/deploying.md, docs/gpu-hosts.md): the npm package `npm run build:agent`
# lays out (one bundled file and sharp), not a clone. Run it beside an engine (vLLM, SGLang, TGI,
# the llama.cpp server) or with its built-in CPU engine. Build from the repository root:
#   docker build -f deploy/docker/agent.Dockerfile -t inference-platform/worker-agent:0.1.0 .
# Flags and WORKER_* variables as for any agent (docs/configuration.md#worker-agent), e.g.
#   docker run -e WORKER_JOIN_TOKEN=jt-… inference-platform/worker-agent:0.1.0 \
#     --control-plane cp.example.com:50051 --engine openai --engine-url http://vllm:8000
# `--engine llama-cpp` needs node-llama-cpp beside the package, which this image leaves out.

FROM node:24.22.3-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
COPY vendor/ vendor/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY common/ common/
COPY control-plane/ control-plane/
COPY gateway/ gateway/
COPY worker-agent/ worker-agent/
COPY proto/ proto/
COPY bench/ bench/
COPY cli/ cli/
# The package only (dist/agent-package): the container has Node already.
RUN npx tsc -p tsconfig.json && node dist/worker-agent/packaging/build-agent.js --skip-binary

FROM node:24.22.3-bookworm-slim AS runtime
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/worker-agent
COPY --from=build /src/dist/agent-package/ ./
# The package's one dependency (sharp, for image jobs), at the version its package.json pins.
RUN npm install --omit=dev --omit=peer --no-audit --no-fund --no-package-lock
ENV NODE_ENV=production
USER 1000:1000
# No port: the agent dials the control plane. Its health is the control plane's to judge (a
# heartbeat every AGENT_HEARTBEAT_INTERVAL_MS, the stream ended after three missed); an agent
# that cannot go on exits (codes in docs/gpu-hosts.md) and the restart policy brings it back.
HEALTHCHECK NONE
# tini forwards SIGTERM, on which the agent drains (WORKER_DRAIN_TIMEOUT_MS) and exits 0.
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/opt/worker-agent/bin/worker-agent.js"]
