// Package events is Flotilla's public contract on the bus: the CloudEvent type
// names, the payload carried by each, the subjects they travel on, and the
// rules that make an event valid.
//
// Every message is a CloudEvent in binary mode. Its type is
// io.flotilla.<noun>.<verb>.v1; changing a payload means a new version, never an
// edit. Subjects partition by cluster and placement so that an apply worker's
// credentials can be limited to its own cluster.
//
// Package api holds the Fleet-shaped Kubernetes types the payloads carry, and
// package bus moves events over NATS JetStream.
package events
