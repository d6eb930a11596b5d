module github.com/flotilla-dev/flotilla/services/standalone

go 1.26.0
