package sealing

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func keys(t *testing.T, names ...string) (*Keys, string) {
	t.Helper()
	var file strings.Builder
	file.WriteString("# test keys\n\n")
	for _, n := range names {
		line, err := NewKeyLine(n)
		if err != nil {
			t.Fatal(err)
		}
		file.WriteString(line)
	}
	k, err := ParseKeys([]byte(file.String()))
	if err != nil {
		t.Fatal(err)
	}
	return k, file.String()
}

func TestSealedValuesOpenWithTheirContextOnly(t *testing.T) {
	k, _ := keys(t, "k1")
	plain := []byte(`{"data":{"password":"aHVudGVyMg=="}}`)
	sealed, err := k.Seal(plain, []byte("v1/Secret/app/db"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sealed, Prefix+"k1:") || strings.Contains(sealed, "aHVudGVyMg") {
		t.Fatalf("sealed = %q: want the prefix, the key's name, and no plain text", sealed)
	}
	again, _ := k.Seal(plain, []byte("v1/Secret/app/db"))
	if again == sealed {
		t.Error("sealing twice gave the same value: the nonce is not fresh")
	}
	got, err := k.Open(sealed, []byte("v1/Secret/app/db"))
	if err != nil || string(got) != string(plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := k.Open(sealed, []byte("v1/Secret/app/other")); err == nil {
		t.Error("a value sealed for one object opened for another")
	}
	tampered := sealed[:len(sealed)-4] + "AAA="
	if _, err := k.Open(tampered, []byte("v1/Secret/app/db")); err == nil {
		t.Error("a tampered value opened")
	}
}

// Rotation: a new key put first seals from then on; values sealed with the old key still
// open while it stays in the file, and say which key they need once it is gone.
func TestKeysRotate(t *testing.T) {
	old, oldFile := keys(t, "k1")
	sealed, err := old.Seal([]byte("s3cret"), nil)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := NewKeyLine("k2")
	rotated, err := ParseKeys([]byte(line + oldFile))
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Primary() != "k2" {
		t.Errorf("primary = %s, want the first key k2", rotated.Primary())
	}
	if got, err := rotated.Open(sealed, nil); err != nil || string(got) != "s3cret" {
		t.Errorf("old value after rotation: %q, %v", got, err)
	}
	resealed, _ := rotated.Seal([]byte("s3cret"), nil)
	if name, _ := SealedWith(resealed); name != "k2" {
		t.Errorf("sealed with %s after rotation, want k2", name)
	}
	newOnly, _ := ParseKeys([]byte(line))
	if _, err := newOnly.Open(sealed, nil); err == nil || !strings.Contains(err.Error(), "k1") {
		t.Errorf("opening without the old key: %v, want an error naming k1", err)
	}
	var none *Keys
	if _, err := none.Seal([]byte("x"), nil); err != ErrNoKeys {
		t.Errorf("sealing without keys: %v", err)
	}
}

func TestParseKeysNamesTheLineNotTheKey(t *testing.T) {
	for name, file := range map[string]string{
		"short key":  "k1:c2hvcnQ=\n",
		"no name":    "c2hvcnQ=\n",
		"bad name":   "k 1:" + strings.Repeat("A", 43) + "=\n",
		"twice":      "k1:" + strings.Repeat("A", 43) + "=\nk1:" + strings.Repeat("A", 43) + "=\n",
		"empty file": "# nothing\n",
		"not base64": "k1:%%%%\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseKeys([]byte(file))
			if err == nil {
				t.Fatal("parsed")
			}
			if strings.Contains(err.Error(), "c2hvcnQ") || strings.Contains(err.Error(), "AAAA") {
				t.Errorf("error shows key material: %v", err)
			}
		})
	}
}

func TestWriteNewKeyFileKeepsAnExistingOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "encryption-keys")
	wrote, err := WriteNewKeyFile(path, "standalone")
	if err != nil || !wrote {
		t.Fatalf("first write: %v %v", wrote, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	before, _ := os.ReadFile(path)
	if wrote, err := WriteNewKeyFile(path, "standalone"); err != nil || wrote {
		t.Errorf("second write: %v %v, want the file kept", wrote, err)
	}
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Error("the key file changed")
	}
	k, err := LoadKeys(path)
	if err != nil || k.Primary() != "standalone" {
		t.Errorf("LoadKeys: %v %v", k.Primary(), err)
	}
}
