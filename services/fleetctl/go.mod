module github.com/flotilla-dev/flotilla/services/fleetctl

go 1.26.0
