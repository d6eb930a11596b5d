module github.com/flotilla-dev/flotilla/e2e

go 1.26.0
