package natsconn

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRedactHidesPasswordsAndTokens(t *testing.T) {
	for in, want := range map[string]string{
		"nats://apply-member-1:s3cret@nats:4222": "nats://apply-member-1:xxxxx@nats:4222",
		"nats://tok3n@nats:4222":                 "nats://xxxxx@nats:4222",
		"nats://127.0.0.1:4222":                  "nats://127.0.0.1:4222",
		"nats://u:p%zz@host:4222":                "xxxxx@host:4222",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	s := Settings{URL: "nats://a:one@h1:4222, nats://b:two@h2:4222"}
	if got := s.Redacted(); strings.Contains(got, "one") || strings.Contains(got, "two") {
		t.Errorf("Redacted() = %q shows a password", got)
	}
}

func TestConnectErrorShowsNoPassword(t *testing.T) {
	s := Settings{URL: "nats://flotilla:hunter2@127.0.0.1:1"}
	_, err := s.Connect("test")
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("error = %q: want the server named and the password hidden", err)
	}
}

func TestValidateNamesEveryBadFlag(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := Settings{URL: "tls://h1:4222,nats://h2:4222", CA: ca}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid settings: %v", err)
	}
	bad := Settings{URL: "http://u:pw@h:1", Cert: filepath.Join(dir, "missing.pem"), Credentials: filepath.Join(dir, "none.creds")}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad settings passed")
	}
	for _, want := range []string{`scheme "http"`, "--nats-cert and --nats-key go together", "--nats-cert: ", "--nats-creds: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "pw") {
		t.Errorf("error %q shows the password", err)
	}
}

func TestRegisterTakesDefaultsFromTheEnvironment(t *testing.T) {
	env := map[string]string{EnvURL: "nats://env:4222", EnvCA: "/ca.pem"}
	var s Settings
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	s.Register(fs, func(k string) string { return env[k] })
	if err := fs.Parse([]string{"--nats-cert", "c.pem"}); err != nil {
		t.Fatal(err)
	}
	if s.URL != "nats://env:4222" || s.CA != "/ca.pem" || s.Cert != "c.pem" {
		t.Errorf("settings = %+v", s)
	}
	var d Settings
	d.Register(flag.NewFlagSet("d", flag.ContinueOnError), func(string) string { return "" })
	if d.URL != DefaultURL {
		t.Errorf("default URL = %q, want %q", d.URL, DefaultURL)
	}
}
