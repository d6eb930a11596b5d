package bus_test

import (
	"testing"

	"github.com/flotilla-dev/flotilla/events/bus"
)

func TestSubjectTokenRoundTrip(t *testing.T) {
	for _, name := range []string{"member-1", "eu-west.prod.example.com", "a", ".leading", "trailing.", "a..b", "0"} {
		tok, err := bus.SubjectToken(name)
		if err != nil {
			t.Fatalf("SubjectToken(%q): %v", name, err)
		}
		for _, r := range tok {
			if r == '.' {
				t.Fatalf("SubjectToken(%q) = %q contains a token separator", name, tok)
			}
		}
		back, err := bus.ParseSubjectToken(tok)
		if err != nil {
			t.Fatalf("ParseSubjectToken(%q): %v", tok, err)
		}
		if back != name {
			t.Errorf("round trip %q -> %q -> %q", name, tok, back)
		}
	}
}

func TestSubjectTokenRejects(t *testing.T) {
	for _, name := range []string{"", "*", "a>", "a b", "tab\there", "new\nline", "under_score"} {
		if tok, err := bus.SubjectToken(name); err == nil {
			t.Errorf("SubjectToken(%q) = %q, want an error", name, tok)
		}
	}
	for _, tok := range []string{"", "a.b", "*", ">", "a b"} {
		if name, err := bus.ParseSubjectToken(tok); err == nil {
			t.Errorf("ParseSubjectToken(%q) = %q, want an error", tok, name)
		}
	}
}

func TestWorkSubject(t *testing.T) {
	got, err := bus.WorkSubject("eu.prod", "web.shop")
	if err != nil {
		t.Fatal(err)
	}
	if want := "flotilla.work.eu_prod.web_shop"; got != want {
		t.Errorf("WorkSubject = %q, want %q", got, want)
	}
	if _, err := bus.WorkSubject("eu prod", "web"); err == nil {
		t.Error("WorkSubject accepted a cluster with a space")
	}
	if _, err := bus.WorkSubject("eu", ""); err == nil {
		t.Error("WorkSubject accepted an empty placement")
	}
}

func TestInboxPrefixes(t *testing.T) {
	for _, tt := range []struct {
		got  func() (string, error)
		want string
	}{
		{func() (string, error) { return bus.MemberInboxPrefix("member-1") }, "_INBOX.apply-member-1"},
		{func() (string, error) { return bus.MemberInboxPrefix("eu.west") }, "_INBOX.apply-eu_west"},
		{func() (string, error) { return bus.InboxPrefix("scheduler") }, "_INBOX.scheduler"},
	} {
		if got, err := tt.got(); err != nil || got != tt.want {
			t.Errorf("inbox prefix = %q, %v; want %q", got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "a*", "a>", "a b", "a_b"} {
		if _, err := bus.MemberInboxPrefix(bad); err == nil {
			t.Errorf("MemberInboxPrefix(%q) made a prefix", bad)
		}
	}
}
