package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A message whose last allowed delivery is never acknowledged (the process
// handling it died) is dropped by the server, which only emits a
// MAX_DELIVERIES advisory. The ADVISORIES stream keeps those advisories, so
// that RescueMaxDeliveries can dead-letter the message even when no service
// was listening at the time.
const (
	StreamAdvisories = "ADVISORIES"
	// ConsumerMaxDeliveries is the durable consumer of RescueMaxDeliveries,
	// shared by every service replica.
	ConsumerMaxDeliveries = "max-deliveries"
	// SubjectsMaxDeliveries are the advisories of exhausted deliveries.
	SubjectsMaxDeliveries = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>"
)

// maxDeliveriesAdvisory is the part of the server's advisory we need
// (io.nats.jetstream.advisory.v1.max_deliver).
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// RescueMaxDeliveries dead-letters messages whose deliveries ran out without
// an acknowledgement, until ctx ends. Run it in every service: the consumer is
// shared, so each advisory is handled once.
func RescueMaxDeliveries(ctx context.Context, js jetstream.JetStream, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	var cons jetstream.Consumer
	err := Await(ctx, log, "NATS JetStream to find consumer "+ConsumerMaxDeliveries+" of stream "+StreamAdvisories,
		func(ctx context.Context) (err error) {
			cons, err = js.Consumer(ctx, StreamAdvisories, ConsumerMaxDeliveries)
			return err
		})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rescue max deliveries: %w", err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		if err := rescue(ctx, js, msg.Data()); err != nil {
			log.Warn("cannot dead-letter a message whose deliveries ran out; will retry", "err", err)
			_ = msg.NakWithDelay(5 * time.Second)
			return
		}
		_ = msg.Ack()
	})
	if err != nil {
		return fmt.Errorf("rescue max deliveries: %w", err)
	}
	<-ctx.Done()
	cc.Drain()
	<-cc.Closed()
	return nil
}

func rescue(ctx context.Context, js jetstream.JetStream, advisory []byte) error {
	var a maxDeliveriesAdvisory
	if err := json.Unmarshal(advisory, &a); err != nil || a.Stream == "" {
		return nil // not an advisory we understand: nothing to rescue
	}
	if a.Stream == StreamDeadLetter || a.Stream == StreamAdvisories {
		return nil
	}
	m := Meta{Stream: a.Stream, Consumer: a.Consumer, Sequence: a.StreamSeq, NumDelivered: a.Deliveries}
	reason := fmt.Sprintf("consumer %s gave up after %d deliveries without an acknowledgement (the handling process stopped or timed out)", a.Consumer, a.Deliveries)
	var headers nats.Header
	var data []byte
	stream, err := js.Stream(ctx, a.Stream)
	if err == nil {
		var raw *jetstream.RawStreamMsg
		raw, err = stream.GetMsg(ctx, a.StreamSeq)
		if err == nil {
			headers, data, m.Subject = raw.Header, raw.Data, raw.Subject
		}
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		reason += "; the message itself is no longer in the stream"
	} else if err != nil {
		return fmt.Errorf("read %s #%d: %w", a.Stream, a.StreamSeq, err)
	}
	dl, id := deadLetterMsg(headers, data, m, oneLine(reason))
	if _, err := js.PublishMsg(ctx, dl, jetstream.WithMsgID(id)); err != nil {
		return fmt.Errorf("dead-letter %s #%d: %w", a.Stream, a.StreamSeq, err)
	}
	return nil
}
