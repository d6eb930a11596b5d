# PostgreSQL on the base hack/images.sh imports from a debootstrap root filesystem with
# Debian's postgresql package; the entrypoint initialises the data directory as the official
# image's does (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, POSTGRES_HOST_AUTH_METHOD).
ARG BASE
FROM ${BASE}
COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
STOPSIGNAL SIGINT
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
