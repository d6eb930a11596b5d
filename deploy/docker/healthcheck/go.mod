module github.com/flotilla-dev/flotilla/deploy/docker/healthcheck

go 1.26.0
