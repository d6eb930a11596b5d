# One Flotilla service (or fleetctl) from a binary built on the host by hack/images.sh: the
# same layout as deploy/docker/Dockerfile's runtime stage, on scratch instead of distroless
# (nothing to pull). The context holds flotilla, healthcheck and the host's CA bundle.
FROM scratch
ARG SERVICE
LABEL org.opencontainers.image.title="flotilla-${SERVICE}" \
      org.opencontainers.image.description="Flotilla ${SERVICE}" \
      org.opencontainers.image.source="https://github.com/flotilla-dev/flotilla"
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY healthcheck /usr/local/bin/healthcheck
COPY flotilla /usr/local/bin/flotilla
USER 65532:65532
EXPOSE 8081
ENTRYPOINT ["/usr/local/bin/flotilla"]
