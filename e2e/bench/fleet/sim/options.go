package sim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Options configure a simulated fleet. Only JetStream and Members are required.
type Options struct {
	// JetStream is the bus. The members share its connection, as the apply workers of one
	// standalone process do.
	JetStream jetstream.JetStream
	// Members is how many member clusters to simulate.
	Members int
	// Prefix names the members <Prefix>-<n>, n from 1, zero-padded to the width of Members
	// (sim-0001 ... sim-5000). Default "sim".
	Prefix string
	// Labels gives member i (0-based) the labels it joins with. Default DefaultSpread.Labels.
	Labels func(i int) map[string]string
	// JoinRate bounds the joins per second; 0 joins as fast as the bus acknowledges them.
	JoinRate float64
	// HeartbeatPeriod is how often each member publishes its heartbeat, and the
	// heartbeatPeriodSeconds it joins with. Default 60s, MemberCluster's default.
	HeartbeatPeriod time.Duration
	// ApplyDelay is how long a member takes to apply a placement's desired state (or carry
	// out its tombstone) before it reports. The zero value reports at once.
	ApplyDelay Delay
	// SeparateAvailability reports Applied first, every manifest not available yet, and
	// Available in a second report AvailableDelay later: two reports per placement, as a
	// member whose workloads take time to start sends. Otherwise one report carries both,
	// with availability as the real worker judges a ready object of each kind.
	SeparateAvailability bool
	AvailableDelay       Delay
	// FailureRate is the chance that an apply fails (one manifest, ManifestApplyFailed). A
	// failed apply is retried with the real worker's backoff, with a new draw each time.
	FailureRate float64
	// Seed makes delays and failures reproducible: each draw is a function of the seed, the
	// member, the placement, its desired state and the attempt, never of timing.
	Seed int64
	// Consumers says how members read their work. Default PerMember.
	Consumers ConsumerMode
	// RetryBase and RetryMax bound the backoff of a failed apply. Default 1s and 5m, the
	// real worker's.
	RetryBase, RetryMax time.Duration
	// MaxInFlight bounds the publishes and applies running at once, all members together.
	// Default 256.
	MaxInFlight int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ConsumerMode says how simulated members consume their work.
type ConsumerMode int

const (
	// PerMember gives each member the real apply worker's durable consumer
	// (bus.EnsureApplyConsumer: apply-<cluster>, filtered to flotilla.work.<cluster>.>)
	// read with bus.Consume, as the real worker does.
	PerMember ConsumerMode = iota
	// Shared reads every member's work through one durable consumer (SharedConsumer,
	// filtered to flotilla.work.>) and hands each message to its member. It is not the
	// real protocol (a member's credentials could never allow it), only a cheaper load.
	Shared
)

// SharedConsumer is the durable consumer of Shared mode.
const SharedConsumer = "fleet-sim"

func (c ConsumerMode) String() string {
	if c == Shared {
		return "shared"
	}
	return "per-member"
}

// Set parses "per-member" or "shared", for flags.
func (c *ConsumerMode) Set(s string) error {
	switch s {
	case "per-member":
		*c = PerMember
	case "shared":
		*c = Shared
	default:
		return fmt.Errorf("%q is not per-member or shared", s)
	}
	return nil
}

func (o *Options) setDefaults() {
	if o.Prefix == "" {
		o.Prefix = "sim"
	}
	if o.Labels == nil {
		o.Labels = DefaultSpread.Labels
	}
	if o.HeartbeatPeriod <= 0 {
		o.HeartbeatPeriod = 60 * time.Second
	}
	if o.RetryBase <= 0 {
		o.RetryBase = time.Second
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 5 * time.Minute
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 256
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func (o *Options) validate() error {
	var errs []error
	if o.JetStream == nil {
		errs = append(errs, errors.New("JetStream is required"))
	}
	if o.Members < 1 {
		errs = append(errs, fmt.Errorf("members: %d, want at least 1", o.Members))
	}
	if o.JoinRate < 0 {
		errs = append(errs, errors.New("join rate must not be negative"))
	}
	if o.FailureRate < 0 || o.FailureRate > 1 {
		errs = append(errs, fmt.Errorf("failure rate %g is not from 0 to 1", o.FailureRate))
	}
	if s := o.HeartbeatPeriod.Seconds(); s < 1 || s > 600 {
		errs = append(errs, fmt.Errorf("heartbeat period %s is not from 1s to 600s (MemberCluster's bounds)", o.HeartbeatPeriod))
	}
	return errors.Join(errs...)
}

// Delay is a distribution of durations. A single value is fixed ("200ms"), two are uniform
// between them ("50ms-500ms"), and "exp:<mean>" is exponential with that mean, capped at
// ten times it. The zero value is no delay. It is a flag.Value.
type Delay struct {
	Min, Max time.Duration
	// Mean makes the delay exponential (Min and Max are then unused).
	Mean time.Duration
}

// Fixed is a delay of exactly d.
func Fixed(d time.Duration) Delay { return Delay{Min: d, Max: d} }

// Uniform is a delay uniformly between lo and hi.
func Uniform(lo, hi time.Duration) Delay { return Delay{Min: lo, Max: hi} }

// Exponential is an exponential delay with the given mean, capped at ten times it.
func Exponential(mean time.Duration) Delay { return Delay{Mean: mean} }

// Sample maps u, uniform in [0, 1), to a delay of the distribution.
func (d Delay) Sample(u float64) time.Duration {
	switch {
	case d.Mean > 0:
		x := -math.Log(1-u) * float64(d.Mean)
		return time.Duration(min(x, 10*float64(d.Mean)))
	case d.Max > d.Min:
		return d.Min + time.Duration(u*float64(d.Max-d.Min))
	}
	return d.Min
}

// IsZero reports whether d never delays.
func (d Delay) IsZero() bool { return d.Mean <= 0 && d.Min <= 0 && d.Max <= 0 }

func (d Delay) String() string {
	switch {
	case d.Mean > 0:
		return "exp:" + d.Mean.String()
	case d.Max > d.Min:
		return d.Min.String() + "-" + d.Max.String()
	}
	return d.Min.String()
}

// Set parses a delay: "200ms", "50ms-500ms" or "exp:200ms".
func (d *Delay) Set(s string) error {
	parse := func(v string) (time.Duration, error) {
		t, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("delay %q: %w", s, err)
		}
		if t < 0 {
			return 0, fmt.Errorf("delay %q is negative", s)
		}
		return t, nil
	}
	if mean, ok := strings.CutPrefix(s, "exp:"); ok {
		m, err := parse(mean)
		*d = Exponential(m)
		return err
	}
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		l, err := parse(lo)
		if err != nil {
			return err
		}
		h, err := parse(hi)
		if err != nil {
			return err
		}
		if h < l {
			return fmt.Errorf("delay %q: the upper bound is below the lower", s)
		}
		*d = Uniform(l, h)
		return nil
	}
	t, err := parse(s)
	*d = Fixed(t)
	return err
}

// draw is a number uniform in [0, 1) that depends only on the seed and parts: the same
// member, placement, desired state and attempt always draw the same, whatever the timing.
func draw(seed int64, parts ...string) float64 {
	h := fnv.New64a()
	h.Write([]byte(strconv.FormatInt(seed, 10)))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	// splitmix64's finaliser, so that nearby inputs land far apart.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}
