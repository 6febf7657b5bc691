# keygate image (sidecar, and the console with its web page): Node 24 slim, production dependencies
# only at run time, runs as a non-root user.
#   docker build -t keygate .
#   docker run --rm -e REDIS_URL=redis://redis:6379 -p 9001:9001 -p 9003:9003 \
#     -e KEYGATE_LISTEN_HOST=0.0.0.0 keygate
# TypeScript runs natively on Node 24 (type stripping): src/ needs no build step; the web page is
# the one built artefact (its own stage below).

# The base, pinned to an exact Node release on an exact Debian release. Not pinned by digest: no
# digest for this tag is published where it could be checked from here (no registry client, no
# Docker engine); to pin one, resolve it where you build and pass it in:
#   docker buildx imagetools inspect node:24.21.0-bookworm-slim   # prints the index digest
#   docker build --build-arg NODE_IMAGE=node:24.21.0-bookworm-slim@sha256:<digest> -t keygate .
# Size, estimated without an engine (docs/kubernetes.md "The image"): about 290 MB unpacked.
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

# --- dependencies: resolved from the lock file, no dev dependencies, no install scripts --------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# --- the web console page (served by `keygate console`): built with the development toolchain;
#     only its static files (dist/web) reach the runtime ---------------------------------------
FROM ${NODE_IMAGE} AS web
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY web ./web
RUN npm run build:web

# --- runtime ------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
# Owned by root, read-only to the process: the image works with a read-only root filesystem.
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY bin ./bin
COPY src ./src
COPY --from=web /app/dist/web ./dist/web
# The image's unprivileged `node` user, by number so that runAsNonRoot can verify it.
USER 1000:1000
# 9001 gRPC ext_authz, 9002 HTTP external auth, 9003 admin (/healthz, /readyz, /metrics).
EXPOSE 9001 9002 9003
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.KEYGATE_ADMIN_PORT||9003)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Node is PID 1 and handles SIGTERM itself (graceful drain); exec form, no shell in between.
ENTRYPOINT ["node", "--disable-warning=ExperimentalWarning", "src/cli/main.ts"]
CMD ["serve"]
