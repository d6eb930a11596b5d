package bus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Content too large for one event travels beside it as a blob: a claim check. The
// content is cut into chunks of at most BlobChunkBytes, each a message on
// <prefix>.<digest>.<n> in a blob stream, and the event carries a BlobRef. Subjects carry
// the names of those allowed to read them (a member's work blobs sit under its own
// cluster's name), so the same permissions that guard the event guard its content. A
// reader fetches chunks by subject with the stream's direct get, checks every chunk and
// the whole against the digest, and never needs more than its own subjects.
const (
	// StreamWorkBlobs holds the manifests of work too large to travel inline, under
	// flotilla.blob.work.<cluster>.<placement>.<digest>.<n>. The rollout removes a
	// digest's chunks some time after newer work replaced it.
	StreamWorkBlobs = "WORKBLOBS"
	// StreamHubBlobs holds hub objects too large to travel inline, under
	// flotilla.blob.hub.<digest>.<n>, as long as the events that refer to them.
	StreamHubBlobs = "HUBBLOBS"

	SubjectsWorkBlobs = "flotilla.blob.work.>"
	SubjectsHubBlobs  = "flotilla.blob.hub.>"
	// SubjectWorkBlobPrefix is followed by <cluster>.<placement> (see WorkBlobPrefix).
	SubjectWorkBlobPrefix = "flotilla.blob.work."
	// SubjectHubBlobPrefix is the prefix of every hub blob.
	SubjectHubBlobPrefix = "flotilla.blob.hub"

	// BlobChunkBytes bounds each chunk message: a quarter of NATS's default max payload.
	BlobChunkBytes = 256 << 10
	// MaxBlobBytes bounds one blob: 256 MiB, 1,024 chunks.
	MaxBlobBytes = 256 << 20
)

// Headers of chunk messages.
const (
	headerBlobDigest = "Flotilla-Blob-Digest"
	headerBlobChunk  = "Flotilla-Blob-Chunk"
)

// BlobRef names a blob: its prefix, the SHA-256 of the whole content, its size and how
// many chunks it has. It is what an event carries instead of the content.
type BlobRef struct {
	Prefix string `json:"prefix"`
	Digest string `json:"sha256"`
	Size   int64  `json:"size"`
	Chunks int    `json:"chunks"`
}

// Validate checks a reference as it came off the bus: the prefix must be wanted (one of
// the prefixes the reader may read), the digest hex, and size and chunks consistent and
// within the bounds.
func (r BlobRef) Validate(wantPrefix string) error {
	switch {
	case r.Prefix != wantPrefix:
		return fmt.Errorf("blob reference: prefix %q, want %q", r.Prefix, wantPrefix)
	case len(r.Digest) != 64 || strings.Trim(r.Digest, "0123456789abcdef") != "":
		return fmt.Errorf("blob reference: digest %q is not a SHA-256 in lower-case hex", r.Digest)
	case r.Size <= 0 || r.Size > MaxBlobBytes:
		return fmt.Errorf("blob reference: size %d is not from 1 to %d bytes", r.Size, MaxBlobBytes)
	case r.Chunks != int((r.Size+BlobChunkBytes-1)/BlobChunkBytes):
		return fmt.Errorf("blob reference: %d chunks for %d bytes, want %d", r.Chunks, r.Size, (r.Size+BlobChunkBytes-1)/BlobChunkBytes)
	}
	return nil
}

// subject is the subject of chunk n.
func (r BlobRef) subject(n int) string {
	return r.Prefix + "." + r.Digest + "." + strconv.Itoa(n)
}

// DigestSubjects is the subject pattern of every chunk of the blob, for a purge.
func (r BlobRef) DigestSubjects() string { return r.Prefix + "." + r.Digest + ".>" }

// NewBlobRef describes data stored under prefix.
func NewBlobRef(prefix string, data []byte) BlobRef {
	sum := sha256.Sum256(data)
	return BlobRef{
		Prefix: prefix, Digest: hex.EncodeToString(sum[:]), Size: int64(len(data)),
		Chunks: (len(data) + BlobChunkBytes - 1) / BlobChunkBytes,
	}
}

// WorkBlobPrefix is the prefix of the work blobs of a placement on a cluster.
func WorkBlobPrefix(cluster, placement string) (string, error) {
	c, err := SubjectToken(cluster)
	if err != nil {
		return "", fmt.Errorf("work blob of cluster: %w", err)
	}
	p, err := SubjectToken(placement)
	if err != nil {
		return "", fmt.Errorf("work blob of placement: %w", err)
	}
	return SubjectWorkBlobPrefix + c + "." + p, nil
}

// PutBlob stores data under prefix and returns its reference. Chunks are published
// together and each acknowledged; a blob whose last chunk is already stored with the same
// digest is not sent again, so putting the same content twice is cheap.
func PutBlob(ctx context.Context, js jetstream.JetStream, stream, prefix string, data []byte) (BlobRef, error) {
	ref := NewBlobRef(prefix, data)
	if ref.Size > MaxBlobBytes {
		return ref, fmt.Errorf("put blob %s: %d bytes, over the limit of %d", prefix, ref.Size, MaxBlobBytes)
	}
	if ref.Chunks == 0 {
		return ref, fmt.Errorf("put blob %s: no content", prefix)
	}
	if last, err := getChunk(ctx, js.Conn(), stream, ref, ref.Chunks-1, time.Second); err == nil && last != nil {
		return ref, nil // stored before
	}
	futures := make([]jetstream.PubAckFuture, 0, ref.Chunks)
	for n := range ref.Chunks {
		chunk := data[n*BlobChunkBytes : min((n+1)*BlobChunkBytes, len(data))]
		msg := &nats.Msg{Subject: ref.subject(n), Data: chunk, Header: nats.Header{}}
		msg.Header.Set(headerBlobDigest, ref.Digest)
		msg.Header.Set(headerBlobChunk, strconv.Itoa(n))
		f, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(ref.subject(n)))
		if err != nil {
			return ref, fmt.Errorf("put blob %s chunk %d: %w", prefix, n, err)
		}
		futures = append(futures, f)
	}
	for n, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return ref, fmt.Errorf("put blob %s chunk %d: %w", prefix, n, err)
		case <-ctx.Done():
			return ref, fmt.Errorf("put blob %s: %w", prefix, ctx.Err())
		}
	}
	return ref, nil
}

// ErrBlobMissing says a chunk of a blob is not stored (any more): the blob was replaced
// and removed, or not stored yet.
var ErrBlobMissing = errors.New("blob chunk not stored")

// GetBlob fetches and checks the blob ref names from stream. Each chunk request waits at
// most perChunk. The reference should have been checked with Validate first.
func GetBlob(ctx context.Context, nc *nats.Conn, stream string, ref BlobRef, perChunk time.Duration) ([]byte, error) {
	if ref.Size > MaxBlobBytes || ref.Chunks < 1 {
		return nil, fmt.Errorf("get blob %s: reference of %d bytes in %d chunks is out of bounds", ref.Prefix, ref.Size, ref.Chunks)
	}
	buf := bytes.NewBuffer(make([]byte, 0, ref.Size))
	for n := range ref.Chunks {
		msg, err := getChunk(ctx, nc, stream, ref, n, perChunk)
		if err != nil {
			return nil, fmt.Errorf("get blob %s.%s: %w", ref.Prefix, ref.Digest, err)
		}
		want := min(BlobChunkBytes, int(ref.Size)-n*BlobChunkBytes)
		if len(msg.Data) != want {
			return nil, fmt.Errorf("get blob %s.%s: chunk %d has %d bytes, want %d", ref.Prefix, ref.Digest, n, len(msg.Data), want)
		}
		buf.Write(msg.Data)
	}
	sum := sha256.Sum256(buf.Bytes())
	if hex.EncodeToString(sum[:]) != ref.Digest {
		return nil, fmt.Errorf("get blob %s.%s: content does not match its digest", ref.Prefix, ref.Digest)
	}
	return buf.Bytes(), nil
}

// getChunk reads chunk n with a direct get of the last message on its subject: the
// request names the subject, so a reader's permissions decide what it may read. It returns
// ErrBlobMissing when the subject holds nothing.
func getChunk(ctx context.Context, nc *nats.Conn, stream string, ref BlobRef, n int, timeout time.Duration) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	subject := ref.subject(n)
	msg, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream+"."+subject, nil)
	if err != nil {
		return nil, fmt.Errorf("chunk %d: %w", n, err)
	}
	if status := msg.Header.Get("Status"); status != "" {
		if status == "404" {
			return nil, fmt.Errorf("chunk %d: %w", n, ErrBlobMissing)
		}
		return nil, fmt.Errorf("chunk %d: status %s %s", n, status, msg.Header.Get("Description"))
	}
	if msg.Header.Get(headerBlobDigest) != ref.Digest || msg.Header.Get(headerBlobChunk) != strconv.Itoa(n) {
		return nil, fmt.Errorf("chunk %d: stored chunk belongs to another blob", n)
	}
	return msg, nil
}

// PurgeBlob removes every chunk of the blob.
func PurgeBlob(ctx context.Context, js jetstream.JetStream, stream string, ref BlobRef) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("purge blob %s.%s: %w", ref.Prefix, ref.Digest, err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(ref.DigestSubjects())); err != nil {
		return fmt.Errorf("purge blob %s.%s: %w", ref.Prefix, ref.Digest, err)
	}
	return nil
}
