module github.com/flotilla-dev/flotilla/services/status

go 1.26.0
