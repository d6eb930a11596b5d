package bus

import (
	"strings"
	"testing"
)

// FuzzBlobRef checks arbitrary blob references as they come off the bus
// (Validate) against what GetBlob then does with one: a reference that
// passes names 1 to 1,024 chunks, each of 1 to BlobChunkBytes bytes adding
// up to its size, on subjects under its prefix; and the reference of any
// content of the allowed size passes.
func FuzzBlobRef(f *testing.F) {
	work := SubjectWorkBlobPrefix + "member-1.web"
	ok := NewBlobRef(work, []byte("content"))
	f.Add(work, ok.Prefix, ok.Digest, ok.Size, ok.Chunks)
	f.Add(work, work, ok.Digest, int64(MaxBlobBytes), 1024)
	f.Add(work, work+".x", strings.ToUpper(ok.Digest), int64(BlobChunkBytes+1), 2)
	f.Add(SubjectHubBlobPrefix, SubjectHubBlobPrefix, ok.Digest, int64(-1), 0)
	f.Fuzz(func(t *testing.T, want, prefix, digest string, size int64, chunks int) {
		r := BlobRef{Prefix: prefix, Digest: digest, Size: size, Chunks: chunks}
		if err := r.Validate(want); err != nil {
			return
		}
		if r.Chunks < 1 || r.Chunks > MaxBlobBytes/BlobChunkBytes {
			t.Fatalf("valid reference %+v has %d chunks", r, r.Chunks)
		}
		var total int64
		for n := range r.Chunks {
			size := min(BlobChunkBytes, int(r.Size)-n*BlobChunkBytes) // as GetBlob wants it
			if size < 1 || size > BlobChunkBytes {
				t.Fatalf("valid reference %+v: chunk %d of %d bytes", r, n, size)
			}
			total += int64(size)
			if s := r.subject(n); !strings.HasPrefix(s, want+".") || strings.Count(s, ".") != strings.Count(want, ".")+2 {
				t.Fatalf("chunk %d of %+v on subject %q, not one token below %q", n, r, s, want+"."+r.Digest)
			}
		}
		if total != r.Size {
			t.Fatalf("chunks of %+v add up to %d bytes", r, total)
		}
		if r.Size > 1<<20 {
			return // content of that size is too slow to make at every run
		}
		if fresh := NewBlobRef(want, make([]byte, r.Size)); fresh.Validate(want) != nil || fresh.Chunks != r.Chunks {
			t.Fatalf("the reference of %d bytes of content, %+v, does not validate alike", r.Size, fresh)
		}
	})
}
