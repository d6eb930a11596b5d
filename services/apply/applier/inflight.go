package applier

import (
	"io"
	"net/http"
	"sync"
)

// DefaultMaxInFlight is the default bound on the requests an Applier has in
// flight to its member, across all placements.
const DefaultMaxInFlight = 32

// inFlight bounds the requests in flight to one member: every request the
// Applier's clients send (reads, applies, dry runs, lists, deletions,
// discovery) takes a slot from the time it is sent until its response body
// has been read or closed. Watches hold their response open for as long as
// they run, so they take none.
//
// This replaces client-go's client-side rate limit (a token bucket, 5 QPS
// unless set), which spaces requests out once its burst is spent however
// idle the member is, with a bound on what the member is asked to do at
// once.
type inFlight struct {
	slots chan struct{}
	next  http.RoundTripper
}

func newInFlight(n int) func(http.RoundTripper) http.RoundTripper {
	slots := make(chan struct{}, n)
	return func(next http.RoundTripper) http.RoundTripper {
		return &inFlight{slots: slots, next: next}
	}
}

func (l *inFlight) RoundTrip(req *http.Request) (*http.Response, error) {
	if watch := req.URL.Query().Get("watch"); watch == "true" || watch == "1" {
		return l.next.RoundTrip(req)
	}
	select {
	case l.slots <- struct{}{}:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		<-l.slots
		return resp, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: sync.OnceFunc(func() { <-l.slots })}
	return resp, nil
}

// releasingBody gives its request's slot back once it has been read to the
// end (or failed) or closed, whichever comes first.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.release()
	}
	return n, err
}

func (b *releasingBody) Close() error {
	defer b.release()
	return b.ReadCloser.Close()
}
