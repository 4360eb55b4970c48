# The image the dovetail_controller resource (and `dovetail render`) deploys:
#   docker build -t ghcr.io/dovetail-sh/dovetail-controller:v0.1.0 .
# A static binary on distroless: no shell, runs as the nonroot user (65532), which
# matches the Deployment's runAsNonRoot and read-only root filesystem.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY controller/ controller/
ARG TARGETOS=linux
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /out/dovetail-controller ./controller/cmd/controller

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/dovetail-controller /dovetail-controller
USER 65532:65532
ENTRYPOINT ["/dovetail-controller"]
