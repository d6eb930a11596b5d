# nats-server built on the host from the github.com/nats-io/nats-server/v2 module at the
# version Flotilla depends on. Arguments work as with the official image (flags only). The
# healthcheck binary answers to wget's calling convention too, so compose's probe
# (wget -q -O /dev/null URL) works on this image and on nats:*-alpine alike.
FROM scratch
ARG VERSION
LABEL org.opencontainers.image.title="nats-server" org.opencontainers.image.version="${VERSION}"
ENV PATH=/usr/local/bin:/usr/bin:/bin
COPY nats-server /usr/local/bin/nats-server
COPY healthcheck /usr/local/bin/healthcheck
COPY healthcheck /usr/bin/wget
EXPOSE 4222 8222 6222
ENTRYPOINT ["/usr/local/bin/nats-server"]
CMD ["-js", "-sd", "/data", "-m", "8222"]
