// Package manifest turns the manifests of a WorkDesired into the objects an
// apply worker applies: decoded, stripped of server-populated fields, unwrapped
// from envelopes, identified, checked for duplicates, and sorted into waves of
// dependency order (namespaces and CRDs first, webhooks last).
//
// Nothing here talks to a cluster; scope (namespaced or not) is the applier's
// business because only the member's discovery knows it.
package manifest
