# hxd container image: `make docker` (or `docker build -t hxd .`).
#
# Build stage: a static, CGO-free binary (the SQLite driver is pure Go).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=${VERSION}" -o /out/hxd ./cmd/hxd \
 && mkdir -p /out/data

# Final stage: no shell, no package manager, runs as the distroless
# "nonroot" user (uid/gid 65532), which owns /data (the SQLite directory).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hxd /usr/local/bin/hxd
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
VOLUME ["/data"]
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/hxd"]
# By default hxd listens on 127.0.0.1:8080, which is not reachable from
# outside the container, and `--auth=none` (the default) refuses a
# non-loopback address. A container deployment must configure
# authentication (OIDC) before it can listen on all interfaces
# (`--addr 0.0.0.0:8080`, published with `docker run -p 8080:8080`); keep the
# database on a volume: `docker run -v hxd-data:/data …`.
CMD ["serve", "--db", "/data/hxd.db"]
