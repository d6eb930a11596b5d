module github.com/flotilla-dev/flotilla/services/fleetctl

go 1.26.0

require (
	github.com/flotilla-dev/flotilla/events v0.0.0
	github.com/flotilla-dev/flotilla/harness v0.0.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	k8s.io/client-go v0.36.3 // indirect
)

replace (
	github.com/flotilla-dev/flotilla/events => ../../events
	github.com/flotilla-dev/flotilla/harness => ../../harness
	github.com/flotilla-dev/flotilla/migrations => ../../migrations
)
