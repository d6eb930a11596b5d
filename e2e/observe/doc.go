// Package observe holds the observability test: the scheduler, rollout,
// status and apply services (each in its own registry, on its own health
// port) on a real bus, a real database and a real member API server, driven
// through one placement: every service's /metrics, scraped over HTTP, shows
// what happened; one trace follows the placement from its event to the
// member's apply report; and the Grafana dashboard and Prometheus alert rules
// in deploy/ ask only for metrics the services export. Its test is skipped
// with -short.
package observe
