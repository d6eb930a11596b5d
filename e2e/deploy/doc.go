// Package deploy checks the ways Flotilla is deployed, as a user would meet them: the
// docker-compose.yaml stack and its images (deploy/docker), and the kustomize base and overlay
// (deploy/kubernetes), rendered with kubectl and dry-run against a real kube-apiserver, with
// the NATS permissions that confine each apply worker to its own member cluster checked on a
// real NATS server.
package deploy
