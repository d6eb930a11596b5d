package service

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// registerStreamLimits adds the flags of the streams' retention and limits (see
// bus.StreamLimits). Every hub service declares the streams when it starts, so give all
// of them the same values.
func (o *Options) registerStreamLimits(fs *flag.FlagSet) {
	t := &o.Topology
	fs.Var(durationFlag{&t.EventsMaxAge}, "events-max-age", "keep events on the EVENTS stream this long (e.g. 7d; default 7d; at most --inbox-retention)")
	fs.Var(bytesFlag[int64]{&t.Limits.EventsMaxBytes}, "events-max-bytes", "bytes the EVENTS stream keeps, oldest dropped first (e.g. 2GiB, the default; -1: no limit)")
	fs.Var(bytesFlag[int32]{&t.Limits.EventsMaxMsgSize}, "events-max-msg-size", "largest event the EVENTS stream takes (default 1MiB, NATS's max_payload)")
	fs.Var(bytesFlag[int64]{&t.Limits.EventsMaxMsgsPerSubject}, "events-max-msgs-per-subject", "events kept per subject on EVENTS, such as one member's heartbeats (default 50000)")
	fs.Var(bytesFlag[int64]{&t.Limits.WorkMaxBytes}, "work-max-bytes", "bytes the WORK stream holds; when full, new work is refused, never dropped (default 512MiB)")
	fs.Var(bytesFlag[int64]{&t.Limits.WorkBlobsMaxBytes}, "work-blobs-max-bytes", "bytes the WORKBLOBS stream holds; when full, new blobs are refused (default 1GiB)")
	fs.Var(bytesFlag[int64]{&t.Limits.HubBlobsMaxBytes}, "hub-blobs-max-bytes", "bytes the HUBBLOBS stream holds; when full, new blobs are refused (default 512MiB)")
	fs.Var(bytesFlag[int64]{&t.Limits.DeadLetterMaxBytes}, "dead-letter-max-bytes", "bytes the DEADLETTER stream keeps, oldest dropped first (default 256MiB)")
}

// ParseBytes reads a size: a number of bytes with an optional binary unit (KiB, MiB,
// GiB, TiB; K, M, G, T mean the same), or -1 for no limit.
func ParseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"K", 10}, {"M", 20}, {"G", 30}, {"T", 40}, {"B", 0}}
	num, shift := s, uint(0)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = n, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q is not a size such as 512MiB", s)
	case n < -1 || (n == -1 && shift != 0):
		return 0, fmt.Errorf("%q: a size is positive, or -1 for no limit", s)
	case n > math.MaxInt64>>shift:
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n << shift, nil
}

// bytesFlag is a size flag (see ParseBytes).
type bytesFlag[T int32 | int64] struct{ v *T }

func (f bytesFlag[T]) String() string {
	if f.v == nil || *f.v == 0 {
		return ""
	}
	return strconv.FormatInt(int64(*f.v), 10)
}

func (f bytesFlag[T]) Set(s string) error {
	n, err := ParseBytes(s)
	if err != nil {
		return err
	}
	if int64(T(n)) != n {
		return fmt.Errorf("%q is too large", s)
	}
	*f.v = T(n)
	return nil
}
