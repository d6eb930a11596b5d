module github.com/flotilla-dev/flotilla/services/rollout

go 1.26.0
