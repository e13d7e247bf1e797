# syntax=docker/dockerfile:1
# Build: make docker-build IMG=<registry>/express-sequencer:<tag>
FROM golang:1.26 AS build
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
COPY api/go.mod api/go.sum api/
RUN go mod download
COPY api/ api/
COPY cmd/express-sequencer/ cmd/express-sequencer/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/express-sequencer ./cmd/express-sequencer

# A static binary on distroless, as an unprivileged user.
FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="express-sequencer" \
      org.opencontainers.image.description="Dependency-ordered rollouts of Express tenants: admission webhooks and an event-driven sequencer" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/medallia/express-sequencer"
COPY --from=build /out/express-sequencer /express-sequencer
USER 65532:65532
ENTRYPOINT ["/express-sequencer"]
