module github.com/flotilla-dev/flotilla/migrations

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/jackc/tern/v2 v2.3.4
)

require (
	dario.cat/mergo v1.0.2 // indirect
	github.com/Masterminds/goutils v1.1.1 // indirect
	github.com/Masterminds/semver/v3 v3.3.0 // indirect
	github.com/Masterminds/sprig/v3 v3.3.0 // indirect
	github.com/flotilla-dev/flotilla/harness v0.0.0
	github.com/google/uuid v1.6.0 // indirect
	github.com/huandu/xstrings v1.5.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/mitchellh/copystructure v1.2.0 // indirect
	github.com/mitchellh/reflectwalk v1.0.2 // indirect
	github.com/shopspring/decimal v1.4.0 // indirect
	github.com/spf13/cast v1.7.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/flotilla-dev/flotilla/e2e => ../e2e

replace github.com/flotilla-dev/flotilla/events => ../events

replace github.com/flotilla-dev/flotilla/harness => ../harness

replace github.com/flotilla-dev/flotilla/harness/containers => ../harness/containers

replace github.com/flotilla-dev/flotilla/services/apply => ../services/apply

replace github.com/flotilla-dev/flotilla/services/fleetctl => ../services/fleetctl

replace github.com/flotilla-dev/flotilla/services/rollout => ../services/rollout

replace github.com/flotilla-dev/flotilla/services/scheduler => ../services/scheduler

replace github.com/flotilla-dev/flotilla/services/standalone => ../services/standalone

replace github.com/flotilla-dev/flotilla/services/status => ../services/status

replace github.com/flotilla-dev/flotilla/platform => ../platform
