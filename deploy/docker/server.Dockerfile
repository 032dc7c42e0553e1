# syntax=docker/dockerfile:1
# The server: gateway + control plane in one Node process (docs/deploying.md).
# Build from the repository root (the context must be the root: .dockerignore is there):
#   docker build -f deploy/docker/server.Dockerfile -t inference-platform/server:0.1.0 .
# Checked without Docker by test/unit/deploy/dockerfiles.test.ts (hadolint's main rules, every
# ENV name read by the code, every COPY source present in the repository or the build output).

# Node 24 is the release the tests run on and the agent binary embeds (.nvmrc); pinned to a
# patch release so two builds of one commit get the same runtime.
FROM node:24.22.3-bookworm-slim AS build
WORKDIR /src
# Dependencies first, so a change of the sources alone reuses this layer. vendor/ holds the
# stand-in package package.json's overrides point node-llama-cpp's GPU builds at.
COPY package.json package-lock.json ./
COPY vendor/ vendor/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json schema.graphql ./
COPY common/ common/
COPY control-plane/ control-plane/
COPY gateway/ gateway/
COPY worker-agent/ worker-agent/
COPY proto/ proto/
COPY bench/ bench/
COPY cli/ cli/
COPY console/ console/
# tsc to dist/, the web console to dist/console, and the agent's single binary to dist/bin,
# which the server serves to the Kubernetes provider's pods (/agent/{version}/…).
RUN npm run build && node dist/worker-agent/packaging/build-agent.js
# The runtime stage takes node_modules from here: production dependencies only.
RUN npm prune --omit=dev --no-audit --no-fund

FROM node:24.22.3-bookworm-slim AS runtime
# tini as PID 1: it forwards SIGTERM to the server (which drains its agents and exits) and reaps
# the processes the server's children leave behind (local agents, the embedded PostgreSQL).
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# Both ports listen on every interface: in a container loopback reaches nothing (the code's
# defaults are 127.0.0.1). DATA_DIR holds the embedded database (when DATABASE_URL is unset),
# the generated keys and local objects: mount a volume there.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    GRPC_HOST=0.0.0.0 \
    GRPC_PORT=50051 \
    DATA_DIR=/var/lib/inference
# What the server reads at run time, laid out as in the repository (it finds its root by
# package.json): the compiled code and console (dist/), the model catalog, the .proto files the
# gRPC servers load, the production node_modules (and vendor/, which they link to).
COPY --from=build /src/package.json /src/package-lock.json ./
COPY --from=build /src/vendor/ vendor/
COPY --from=build /src/node_modules/ node_modules/
COPY --from=build /src/dist/ dist/
COPY --from=build /src/proto/worker/v1/worker.proto proto/worker/v1/worker.proto
COPY --from=build /src/proto/cluster/v1/cluster.proto proto/cluster/v1/cluster.proto
COPY --from=build /src/control-plane/catalog/models.json control-plane/catalog/models.json
RUN mkdir -p /var/lib/inference && chown 1000:1000 /var/lib/inference
# The node image's `node` user, by number so Kubernetes can check runAsNonRoot.
USER 1000:1000
EXPOSE 8080 50051
# Ready: the database answers and the server is not draining (`/readyz`, docs/telemetry.md).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/readyz').then((r)=>process.exit(r.status===200?0:1),()=>process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/gateway/main.js"]
