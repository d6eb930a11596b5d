package bus

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Unavailable marks err as caused by a dependency that cannot be reached (a database, the
// bus, a member's API server), not by the event: Consume then pauses and retries the event
// when the dependency is back, without using up its deliveries.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return &unavailableError{err: err}
}

type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// IsOutage reports whether err says that a dependency is out of reach or too slow rather
// than that the work itself is wrong: an error marked Unavailable, a deadline, a network
// error (refused, reset, unreachable, a timeout), a NATS connection error, and the
// PostgreSQL errors that retrying fixes (connection failures and shutdowns, serialization
// failures, deadlocks, lock and statement timeouts, too many connections). A Permanent error
// never is.
//
// PostgreSQL errors are recognised by their methods (SQLState, SafeToRetry, as pgconn's
// errors have), so that the bus needs no database driver.
func IsOutage(err error) bool {
	if err == nil || IsPermanent(err) {
		return false
	}
	var u *unavailableError
	if errors.As(err, &u) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	for _, target := range outageErrors {
		if errors.Is(err, target) {
			return true
		}
	}
	var sqlErr interface{ SQLState() string }
	if errors.As(err, &sqlErr) {
		return outageSQLState(sqlErr.SQLState())
	}
	var retryable interface{ SafeToRetry() bool }
	return errors.As(err, &retryable) && retryable.SafeToRetry()
}

// outageErrors are the errors of a connection that is down or going down.
var outageErrors = []error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT,
	nats.ErrConnectionClosed, nats.ErrConnectionReconnecting, nats.ErrConnectionDraining,
	nats.ErrDisconnected, nats.ErrNoServers, nats.ErrTimeout, nats.ErrNoResponders, nats.ErrStaleConnection,
	jetstream.ErrNoHeartbeat, jetstream.ErrJetStreamNotEnabled,
}

// outageSQLState reports whether a PostgreSQL error code says to try again later: class 08
// (connection exception), 53 (insufficient resources), 57P01-57P03 (the server is shutting
// down or starting), 57014 (query cancelled: statement_timeout), 40001 and 40P01
// (serialization failure, deadlock), 55P03 (lock timeout) and class 58 (system error).
func outageSQLState(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53"), strings.HasPrefix(code, "58"):
		return true
	}
	switch code {
	case "57P01", "57P02", "57P03", "57014", "40001", "40P01", "55P03":
		return true
	}
	return false
}

// Await calls try until it succeeds, waiting with capped backoff after each failure that
// IsOutage, and logging what it waits for. It returns try's first other error, or ctx's
// error when ctx ends first. Services use it at start, when NATS or PostgreSQL may not be up
// yet.
func Await(ctx context.Context, log *slog.Logger, what string, try func(context.Context) error) error {
	if log == nil {
		log = slog.Default()
	}
	delay := awaitFirst
	for attempt := 1; ; attempt++ {
		err := try(ctx)
		if err == nil {
			if attempt > 1 {
				log.Info("done waiting: "+what, "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !IsOutage(err) {
			return err
		}
		log.Warn("waiting: "+what, "attempt", attempt, "retry_in", delay, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, awaitMax)
	}
}

// Backoff of Await.
const (
	awaitFirst = 250 * time.Millisecond
	awaitMax   = 5 * time.Second
)
