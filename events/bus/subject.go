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
