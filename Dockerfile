# syntax=docker/dockerfile:1
# The Hookline operator image.
#   build      npm ci (all dependencies) and tsc -> dist/
#   prod-deps  npm ci --omit=dev: the runtime dependencies only
#   runtime    distroless (glibc + libstdc++, no shell, no package manager), the Node binary of
#              the build stage, non-root (65532), ENTRYPOINT `hookline operator` in exec form.
# NODE_VERSION is the one source of the image's Node (a current LTS); hack/node-lts.sh reads it
# so CI runs the unit tests under the same Node major.
ARG NODE_VERSION=26.12.1

FROM node:${NODE_VERSION}-trixie-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npm run build

FROM node:${NODE_VERSION}-trixie-slim AS prod-deps
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM gcr.io/distroless/cc-debian13:nonroot AS runtime
COPY --from=build /usr/local/bin/node /usr/local/bin/node
WORKDIR /app
COPY --from=prod-deps /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY crds ./crds
ENV NODE_ENV=production
USER 65532:65532
# METRICS_PORT, HEALTH_PORT (/healthz, /readyz)
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/node", "/app/bin/hookline.js", "operator"]
