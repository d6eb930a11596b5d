package bus

import (
	"fmt"
	"strings"
	"unicode"
)

// SubjectToken turns a Kubernetes name (a cluster or placement) into one NATS
// subject token. Names may contain '.', which separates tokens, so '.' becomes
// '_'; '_' is not valid in a DNS-1123 name, which keeps the mapping reversible
// (see ParseSubjectToken). Empty names and names with '_', '*', '>',
// whitespace or control characters are rejected.
func SubjectToken(name string) (string, error) {
	if err := checkToken(name, "_"); err != nil {
		return "", fmt.Errorf("subject token for %q: %w", name, err)
	}
	return strings.ReplaceAll(name, ".", "_"), nil
}

// ParseSubjectToken reverses SubjectToken.
func ParseSubjectToken(token string) (string, error) {
	if err := checkToken(token, "."); err != nil {
		return "", fmt.Errorf("parse subject token %q: %w", token, err)
	}
	return strings.ReplaceAll(token, "_", "."), nil
}

func checkToken(s, forbidden string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	for _, r := range s {
		switch {
		case r == '*' || r == '>' || strings.ContainsRune(forbidden, r):
			return fmt.Errorf("contains %q", r)
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return fmt.Errorf("contains whitespace or a control character")
		}
	}
	return nil
}

// WorkSubject is the subject of the desired state of one placement on one
// cluster: flotilla.work.<cluster>.<placement>.
func WorkSubject(cluster, placement string) (string, error) {
	c, err := SubjectToken(cluster)
	if err != nil {
		return "", fmt.Errorf("work subject: cluster: %w", err)
	}
	p, err := SubjectToken(placement)
	if err != nil {
		return "", fmt.Errorf("work subject: placement: %w", err)
	}
	return SubjectWorkPrefix + c + "." + p, nil
}

// DeadLetterSubject is where messages a consumer gave up on are kept:
// flotilla.deadletter.<consumer>.
func DeadLetterSubject(consumer string) string {
	return SubjectDeadLetterPrefix + consumer
}

// Inboxes. Replies come back on the requester's inbox: JetStream API answers, the
// messages a pull consumer is sent, publish acknowledgements, query answers. nats.go's
// default inbox, _INBOX.<random>, is the same space for every client, so a member's
// credentials would have to allow _INBOX.> and could read replies meant for others (other
// members' pulled work and its Secrets). Every Flotilla program therefore connects with
// an inbox prefix of its own (nats.CustomInboxPrefix), and a member's NATS user may
// subscribe under its own prefix only (deploy/kubernetes/member.sh).

// InboxRoot is the first token of every inbox.
const InboxRoot = "_INBOX"

// InboxPrefix is the inbox prefix of the program called client (a hub service, fleetctl):
// _INBOX.<client>. A default inbox never contains '-', and hub programs' names never
// start with "apply-", so no prefix is another's.
func InboxPrefix(client string) (string, error) {
	tok, err := SubjectToken(client)
	if err != nil {
		return "", fmt.Errorf("inbox prefix: %w", err)
	}
	return InboxRoot + "." + tok, nil
}

// MemberInboxPrefix is the inbox prefix of a member's apply worker:
// _INBOX.apply-<cluster>, the one inbox its NATS user may subscribe to.
func MemberInboxPrefix(cluster string) (string, error) {
	tok, err := SubjectToken(cluster)
	if err != nil {
		return "", fmt.Errorf("inbox prefix of a member: %w", err)
	}
	return InboxRoot + "." + ApplyUserPrefix + tok, nil
}

// ApplyUserPrefix begins the names of a member's worker: its NATS user and durable
// consumer (apply-<cluster>) and its inbox prefix.
const ApplyUserPrefix = "apply-"
