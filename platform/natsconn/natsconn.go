// Package natsconn holds how every Flotilla program reaches NATS: the server URL, a
// credentials file and TLS files, filled from flags and the environment, checked once, and
// turned into a connection. Services and fleetctl share it, so a connection setting exists
// in exactly one place.
package natsconn

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// Environment variables that give the flags their defaults.
const (
	EnvURL         = "FLOTILLA_NATS_URL"
	EnvCredentials = "FLOTILLA_NATS_CREDS"
	EnvCA          = "FLOTILLA_NATS_CA"
	EnvCert        = "FLOTILLA_NATS_CERT"
	EnvKey         = "FLOTILLA_NATS_KEY"
)

// DefaultURL is where `make run` and the standalone binary listen.
const DefaultURL = "nats://127.0.0.1:4222"

// Settings say how to reach NATS.
type Settings struct {
	// URL is the server, or a comma-separated list of servers of one cluster
	// (nats://, tls://, ws:// or wss://).
	URL string
	// Credentials is a .creds file (a user JWT and its nkey seed); optional.
	Credentials string
	// CA verifies the server's certificate; Cert and Key are the client's certificate
	// for mutual TLS. All optional; Cert and Key go together.
	CA, Cert, Key string
}

// Register adds the flags to fs, with defaults from getenv (os.Getenv when nil).
func (s *Settings) Register(fs *flag.FlagSet, getenv func(string) string) {
	if getenv == nil {
		getenv = os.Getenv
	}
	url := getenv(EnvURL)
	if url == "" {
		url = DefaultURL
	}
	fs.StringVar(&s.URL, "nats", url, "NATS server URL, or a comma-separated list (env "+EnvURL+")")
	fs.StringVar(&s.Credentials, "nats-creds", getenv(EnvCredentials), "NATS credentials file (env "+EnvCredentials+")")
	fs.StringVar(&s.CA, "nats-ca", getenv(EnvCA), "CA certificate that verifies the NATS server (env "+EnvCA+")")
	fs.StringVar(&s.Cert, "nats-cert", getenv(EnvCert), "client certificate for NATS mutual TLS, with --nats-key (env "+EnvCert+")")
	fs.StringVar(&s.Key, "nats-key", getenv(EnvKey), "client key for NATS mutual TLS, with --nats-cert (env "+EnvKey+")")
}

// Validate checks the settings without connecting: every error names its flag.
func (s *Settings) Validate() error {
	var errs []error
	if strings.TrimSpace(s.URL) == "" {
		errs = append(errs, errors.New("--nats: a NATS server URL is required"))
	}
	for _, u := range strings.Split(s.URL, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		p, err := url.Parse(u)
		if err != nil || p.Host == "" {
			errs = append(errs, fmt.Errorf("--nats: %q is not a server URL like nats://host:4222", Redact(u)))
			continue
		}
		switch p.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			errs = append(errs, fmt.Errorf("--nats: %q: scheme %q is not nats, tls, ws or wss", Redact(u), p.Scheme))
		}
	}
	if (s.Cert == "") != (s.Key == "") {
		errs = append(errs, errors.New("--nats-cert and --nats-key go together: give both or neither"))
	}
	for _, f := range []struct{ flag, path string }{
		{"--nats-creds", s.Credentials}, {"--nats-ca", s.CA}, {"--nats-cert", s.Cert}, {"--nats-key", s.Key},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.flag, err))
		}
	}
	return errors.Join(errs...)
}

// Options are the nats.Options the settings stand for.
func (s *Settings) Options() []nats.Option {
	var opts []nats.Option
	if s.Credentials != "" {
		opts = append(opts, nats.UserCredentials(s.Credentials))
	}
	if s.CA != "" {
		opts = append(opts, nats.RootCAs(s.CA))
	}
	if s.Cert != "" {
		opts = append(opts, nats.ClientCert(s.Cert, s.Key))
	}
	return opts
}

// Connect connects as name, with the settings' options and then extra. Its error names
// the server without any password in its URL.
func (s *Settings) Connect(name string, extra ...nats.Option) (*nats.Conn, error) {
	opts := append([]nats.Option{nats.Name(name)}, s.Options()...)
	nc, err := nats.Connect(s.URL, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", s.Redacted(), err)
	}
	return nc, nil
}

// Redacted is the URL with any password replaced, fit for a log line or an error.
func (s *Settings) Redacted() string {
	parts := strings.Split(s.URL, ",")
	for i, u := range parts {
		parts[i] = Redact(strings.TrimSpace(u))
	}
	return strings.Join(parts, ",")
}

// Redact replaces the password (or a lone token) of one server URL with "xxxxx".
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		if i := strings.LastIndex(u, "@"); i >= 0 {
			// Unparseable but holding user info: keep only what follows it.
			return "xxxxx@" + u[i+1:]
		}
		return u
	}
	if _, has := p.User.Password(); has {
		p.User = url.UserPassword(p.User.Username(), "xxxxx")
	} else {
		p.User = url.User("xxxxx") // a token
	}
	return p.String()
}
