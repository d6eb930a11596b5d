package rollout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/platform/sealing"
)

// Secrets at rest. A manifest that holds a Secret value (a Secret, or an envelope wrapping
// one) is stored in hub_resources and resource_snapshots as a shell: the manifest with its
// Secret values redacted, so that it reads and selects like the object it stands for, plus
// sealedField, the whole manifest sealed with the operator's key (--encryption-key-file).
// The rollout opens it when it reads the row; hashes are of the manifest itself, so sealing
// again (another nonce, another key) changes no snapshot.

// sealedField holds the sealed manifest in a shell. No Kubernetes object has a field so
// named at its top level, and the hub store refuses manifests that do.
const sealedField = "flotilla.io/sealed"

// errNoKey refuses to store a Secret in plain text.
var errNoKey = errors.New("secrets are stored encrypted and the rollout has no encryption key: " +
	"give it --encryption-key-file (or " + EnvEncryptionKeyFile + "); see deploy/README.md")

// sealManifest returns what to store for a canonical manifest: itself, or for one holding a
// Secret value, its sealed shell. Without keys a Secret is refused with errNoKey.
func sealManifest(keys *sealing.Keys, manifest json.RawMessage) (json.RawMessage, error) {
	shell, holds := api.RedactSecrets(manifest)
	if !holds {
		return manifest, nil
	}
	if keys == nil {
		return nil, errNoKey
	}
	var obj map[string]any
	if err := json.Unmarshal(shell, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("seal: the manifest is not an object")
	}
	sealed, err := keys.Seal(manifest, sealContext(obj))
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	obj[sealedField] = sealed
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return out, nil
}

// openManifest returns the manifest a stored one stands for: itself, or for a shell, the
// manifest sealed in it.
func openManifest(keys *sealing.Keys, stored json.RawMessage) (json.RawMessage, error) {
	if !bytes.Contains(stored, []byte(sealedField)) {
		return stored, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(stored, &obj); err != nil {
		return nil, fmt.Errorf("open a stored manifest: %w", err)
	}
	sealed, ok := obj[sealedField].(string)
	if !ok {
		return stored, nil
	}
	plain, err := keys.Open(sealed, sealContext(obj))
	if err != nil {
		return nil, fmt.Errorf("open the stored %s %s: %w", obj["kind"], name(obj), err)
	}
	return plain, nil
}

// sealContext binds a sealed manifest to the object it is stored as: a shell copied onto
// another object's row does not open.
func sealContext(obj map[string]any) []byte {
	ns, _ := metadata(obj)["namespace"].(string)
	return fmt.Appendf(nil, "flotilla hub manifest %v/%v/%s/%s", obj["apiVersion"], obj["kind"], ns, name(obj))
}

func metadata(obj map[string]any) map[string]any {
	m, _ := obj["metadata"].(map[string]any)
	return m
}

func name(obj map[string]any) string {
	n, _ := metadata(obj)["name"].(string)
	return n
}

// hasSealedField reports whether a manifest given to the hub store has the field shells use:
// it would be taken for one.
func hasSealedField(manifest json.RawMessage) bool {
	if !bytes.Contains(manifest, []byte(sealedField)) {
		return false
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(manifest, &obj); err != nil {
		return false
	}
	_, has := obj[sealedField]
	return has
}

// sealAll and openAll apply sealManifest and openManifest to a snapshot's manifests.
func sealAll(keys *sealing.Keys, manifests []json.RawMessage) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(manifests))
	for i, m := range manifests {
		var err error
		if out[i], err = sealManifest(keys, m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func openAll(keys *sealing.Keys, stored []json.RawMessage) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(stored))
	for i, m := range stored {
		var err error
		if out[i], err = openManifest(keys, m); err != nil {
			return nil, err
		}
	}
	return out, nil
}
