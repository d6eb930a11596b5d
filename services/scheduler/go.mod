module github.com/flotilla-dev/flotilla/services/scheduler

go 1.26.0

require (
	go.yaml.in/yaml/v2 v2.4.3 // indirect
	k8s.io/apimachinery v0.36.3 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)
