# The controller image. A release publishes it (make release builds the same binary
# into an OCI archive); a build from source has no image of its own, so build and push
# this one and set it as dovetail_controller's image (`dovetail render --image`):
#   docker build -t <registry>/dovetail-controller:dev . && docker push <registry>/dovetail-controller:dev
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
