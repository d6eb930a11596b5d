package bus_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/events/bus"
)

func blobContent(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return b
}

// TestBlobRoundTripInBoundedChunks stores 3 MB: every chunk message stays within the
// bound, the content comes back byte for byte, and storing it again sends nothing.
func TestBlobRoundTripInBoundedChunks(t *testing.T) {
	nc, js := startBus(t, bus.TopologyOptions{})
	prefix, err := bus.WorkBlobPrefix("member-1", "web")
	if err != nil {
		t.Fatal(err)
	}
	data := blobContent(3<<20 + 17)
	ref, err := bus.PutBlob(t.Context(), js, bus.StreamWorkBlobs, prefix, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Validate(prefix); err != nil {
		t.Fatalf("the reference PutBlob made does not validate: %v", err)
	}
	s, err := js.Stream(t.Context(), bus.StreamWorkBlobs)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(ref.Chunks) || ref.Chunks != 13 {
		t.Fatalf("%d messages stored, reference says %d chunks; want 13", info.State.Msgs, ref.Chunks)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Data) > bus.BlobChunkBytes {
			t.Errorf("chunk %s has %d bytes, over the bound of %d", m.Subject, len(m.Data), bus.BlobChunkBytes)
		}
	}
	got, err := bus.GetBlob(t.Context(), nc, bus.StreamWorkBlobs, ref, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the blob came back different")
	}
	if _, err := bus.PutBlob(t.Context(), js, bus.StreamWorkBlobs, prefix, data); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Info(t.Context()); again.State.LastSeq != info.State.LastSeq {
		t.Errorf("storing the same blob again published %d more messages", again.State.LastSeq-info.State.LastSeq)
	}
	if err := bus.PurgeBlob(t.Context(), js, bus.StreamWorkBlobs, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.GetBlob(t.Context(), nc, bus.StreamWorkBlobs, ref, 5*time.Second); !errors.Is(err, bus.ErrBlobMissing) {
		t.Errorf("after a purge: %v, want ErrBlobMissing", err)
	}
}

// TestBlobDetectsATamperedChunk replaces one chunk with other bytes under the same
// headers: the reader refuses the content.
func TestBlobDetectsATamperedChunk(t *testing.T) {
	nc, js := startBus(t, bus.TopologyOptions{})
	prefix, _ := bus.WorkBlobPrefix("member-1", "web")
	data := blobContent(bus.BlobChunkBytes*2 + 5)
	ref, err := bus.PutBlob(t.Context(), js, bus.StreamWorkBlobs, prefix, data)
	if err != nil {
		t.Fatal(err)
	}
	evil := &nats.Msg{Subject: prefix + "." + ref.Digest + ".1", Data: bytes.Repeat([]byte("x"), bus.BlobChunkBytes), Header: nats.Header{}}
	evil.Header.Set("Flotilla-Blob-Digest", ref.Digest)
	evil.Header.Set("Flotilla-Blob-Chunk", "1")
	if _, err := js.PublishMsg(t.Context(), evil); err != nil {
		t.Fatal(err)
	}
	_, err = bus.GetBlob(t.Context(), nc, bus.StreamWorkBlobs, ref, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Errorf("tampered blob: %v, want a digest mismatch", err)
	}
}

func TestBlobRefValidateRefusesWhatItMustNotRead(t *testing.T) {
	own, _ := bus.WorkBlobPrefix("member-1", "web")
	other, _ := bus.WorkBlobPrefix("member-2", "web")
	good := bus.NewBlobRef(own, blobContent(1000))
	if err := good.Validate(own); err != nil {
		t.Fatal(err)
	}
	for name, ref := range map[string]bus.BlobRef{
		"another member's blob": bus.NewBlobRef(other, blobContent(1000)),
		"a wildcard digest":     {Prefix: own, Digest: ">", Size: 1000, Chunks: 1},
		"too large":             {Prefix: own, Digest: good.Digest, Size: bus.MaxBlobBytes + 1, Chunks: bus.MaxBlobBytes/bus.BlobChunkBytes + 1},
		"chunks off":            {Prefix: own, Digest: good.Digest, Size: 1000, Chunks: 2},
		"empty":                 {Prefix: own, Digest: good.Digest},
	} {
		if err := ref.Validate(own); err == nil {
			t.Errorf("%s: validated", name)
		}
	}
}
