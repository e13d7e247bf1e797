# syntax=docker/dockerfile:1
# Build: make docker-build IMG=<registry>/express-sequencer:<tag>
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY certs/ certs/
COPY cmd/ cmd/
COPY defaults/ defaults/
COPY sequencer/ sequencer/
COPY webhook/ webhook/
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/express-sequencer ./cmd/express-sequencer

# A static binary on distroless, as an unprivileged user.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/express-sequencer /express-sequencer
USER 65532:65532
ENTRYPOINT ["/express-sequencer"]
