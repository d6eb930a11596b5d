package kube

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// portsFile records, in a persistent environment's directory, the ports its processes listened
// on, so that the next Start brings them back at the same addresses.
const portsFile = "ports.json"

// portBook is the record of ports; a throwaway environment keeps it in memory only.
type portBook struct {
	path string
	mu   sync.Mutex
	// persist: write changes to path.
	persist bool
	ports   recordedPorts
}

type recordedPorts struct {
	EtcdClient int            `json:"etcdClient,omitempty"`
	EtcdPeer   int            `json:"etcdPeer,omitempty"`
	Members    map[string]int `json:"members,omitempty"`
}

// load reads the record, if there is one, and makes the book write changes back.
func (b *portBook) load() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.persist = true
	data, err := os.ReadFile(b.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read recorded ports: %w", err)
	}
	if err := json.Unmarshal(data, &b.ports); err != nil {
		return fmt.Errorf("read recorded ports from %s: %w", b.path, err)
	}
	return nil
}

func (b *portBook) etcd() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return []int{b.ports.EtcdClient, b.ports.EtcdPeer}
}

func (b *portBook) member(name string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ports.Members[name]
}

func (b *portBook) setEtcd(client, peer int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ports.EtcdClient, b.ports.EtcdPeer = client, peer
	return b.save()
}

func (b *portBook) setMember(name string, port int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ports.Members == nil {
		b.ports.Members = map[string]int{}
	}
	b.ports.Members[name] = port
	return b.save()
}

// save writes the record atomically; the caller holds mu.
func (b *portBook) save() error {
	if !b.persist {
		return nil
	}
	data, err := json.MarshalIndent(b.ports, "", "  ")
	if err != nil {
		return err
	}
	tmp := b.path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("record ports: %w", err)
	}
	if err := os.Rename(tmp, b.path); err != nil {
		return fmt.Errorf("record ports: %w", err)
	}
	return nil
}

// port is the port of an https://host:port URL.
func port(rawURL string) int {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}

// readToken reads the administrator's token from a member's token file; "" if there is none.
func readToken(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	tok, _, _ := strings.Cut(string(data), ",")
	return strings.TrimSpace(tok)
}

func fileExists(path string) bool {
	fi, err := os.Stat(filepath.Clean(path))
	return err == nil && !fi.IsDir()
}
