// Package sealing encrypts what a hub service must store to use again but nobody may read at
// rest: the values of Secrets in the rollout's hub store and resource snapshots. It works the
// way kube-apiserver's encryption configuration does with its aesgcm provider: keys have
// names, the first key seals, every key opens, and each sealed value names the key that
// sealed it. To rotate, put a new key first and keep the old ones until nothing sealed with
// them is left (the rollout re-seals what it stores with the first key when it starts).
package sealing

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Prefix starts every sealed value; the key's name and the sealed bytes follow:
// flotilla:enc:aesgcm:v1:<key name>:<base64 of nonce and ciphertext>.
const Prefix = "flotilla:enc:aesgcm:v1:"

// KeySize is the size of a key: AES-256.
const KeySize = 32

// ErrNoKeys is the error of sealing without keys.
var ErrNoKeys = errors.New("no encryption key is configured")

// Keys seal with the first key and open with any.
type Keys struct {
	keys []key
}

type key struct {
	name string
	aead cipher.AEAD
}

var keyName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// ParseKeys reads a key file: one key per line as <name>:<base64 of 32 random bytes>;
// blank lines and lines starting with # are ignored. The first key seals.
//
//	# made with: echo "key1:$(head -c 32 /dev/urandom | base64)"
//	key2:3q2+7w...
//	key1:AAECAw...
func ParseKeys(data []byte) (*Keys, error) {
	k := &Keys{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, encoded, ok := strings.Cut(line, ":")
		if !ok || !keyName.MatchString(name) {
			return nil, fmt.Errorf("line %d: want <name>:<base64 key>, the name of letters, digits, '.', '_' or '-'", n)
		}
		if seen[name] {
			return nil, fmt.Errorf("line %d: key %s is given twice", n, name)
		}
		seen[name] = true
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
		if err != nil || len(raw) != KeySize {
			// Never the key itself in the error: it may end up in a log.
			return nil, fmt.Errorf("line %d: key %s is not %d bytes in base64", n, name, KeySize)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("line %d: key %s: %w", n, name, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("line %d: key %s: %w", n, name, err)
		}
		k.keys = append(k.keys, key{name: name, aead: aead})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(k.keys) == 0 {
		return nil, errors.New("no key in the file")
	}
	return k, nil
}

// LoadKeys reads the key file at path (see ParseKeys).
func LoadKeys(path string) (*Keys, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("encryption key file: %w", err)
	}
	k, err := ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("encryption key file %s: %w", path, err)
	}
	return k, nil
}

// NewKeyLine is a line for a key file holding a new random key called name.
func NewKeyLine(name string) (string, error) {
	if !keyName.MatchString(name) {
		return "", fmt.Errorf("key name %q: letters, digits, '.', '_' or '-'", name)
	}
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	return name + ":" + base64.StdEncoding.EncodeToString(raw) + "\n", nil
}

// WriteNewKeyFile writes a key file holding one new key at path, readable by its owner
// only, unless a file is there already. It reports whether it wrote one.
func WriteNewKeyFile(path, name string) (bool, error) {
	line, err := NewKeyLine(name)
	if err != nil {
		return false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("encryption key file: %w", err)
	}
	_, err = f.WriteString("# Flotilla's encryption key for Secrets at rest: keep it, and keep it private.\n" + line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("encryption key file: %w", err)
	}
	return true, nil
}

// Primary names the key that seals.
func (k *Keys) Primary() string {
	if k == nil || len(k.keys) == 0 {
		return ""
	}
	return k.keys[0].name
}

// Seal encrypts plaintext with the first key. context is authenticated, not stored: Open
// needs the same context, so a sealed value moved to another object does not open.
func (k *Keys) Seal(plaintext, context []byte) (string, error) {
	if k == nil || len(k.keys) == 0 {
		return "", ErrNoKeys
	}
	first := k.keys[0]
	nonce := make([]byte, first.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	sealed := first.aead.Seal(nonce, nonce, plaintext, context)
	return Prefix + first.name + ":" + base64.StdEncoding.EncodeToString(sealed), nil
}

// Open decrypts a value Seal made with any of the keys and the same context.
func (k *Keys) Open(sealed string, context []byte) ([]byte, error) {
	name, rest, err := parse(sealed)
	if err != nil {
		return nil, err
	}
	if k == nil || len(k.keys) == 0 {
		return nil, fmt.Errorf("open a value sealed with key %s: %w", name, ErrNoKeys)
	}
	for _, kk := range k.keys {
		if kk.name != name {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(rest)
		if err != nil || len(raw) < kk.aead.NonceSize() {
			return nil, fmt.Errorf("open a value sealed with key %s: not base64 of a nonce and ciphertext", name)
		}
		n := kk.aead.NonceSize()
		plain, err := kk.aead.Open(nil, raw[:n], raw[n:], context)
		if err != nil {
			return nil, fmt.Errorf("open a value sealed with key %s: %w (another key of that name, or a value moved from another object?)", name, err)
		}
		return plain, nil
	}
	return nil, fmt.Errorf("open a value sealed with key %s: no such key in the key file (was it rotated out too early?)", name)
}

// SealedWith names the key a sealed value was sealed with.
func SealedWith(sealed string) (string, error) {
	name, _, err := parse(sealed)
	return name, err
}

// IsSealed reports whether s is a sealed value.
func IsSealed(s string) bool { return strings.HasPrefix(s, Prefix) }

func parse(sealed string) (name, rest string, err error) {
	body, ok := strings.CutPrefix(sealed, Prefix)
	if !ok {
		return "", "", errors.New("open: not a sealed value")
	}
	name, rest, ok = strings.Cut(body, ":")
	if !ok || !keyName.MatchString(name) {
		return "", "", errors.New("open: a sealed value without a key name")
	}
	return name, rest, nil
}
