// Package compose tests the docker-compose stack (docker-compose.yaml with the two local member
// clusters of deploy/docker/compose.local.yaml) as its users run it: images built here with no
// registry (hack/images.sh), `docker compose` v2, fleetctl in its container. One stack, a
// project of its own with no host port taken, serves every test and is removed at the end
// (FLOTILLA_COMPOSE_KEEP=1 keeps it).
//
// The suite runs wherever a Docker engine answers; elsewhere its tests skip, except with
// CI=true, where a missing engine fails the suite.
package compose
