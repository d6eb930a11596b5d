// Command healthcheck probes a Flotilla service's health endpoint from inside its container.
// The images are distroless (no shell, no curl), so a container healthcheck needs a binary of
// its own: it exits 0 when the URL answers 200 OK within the timeout, and 1 otherwise.
//
//	healthcheck [URL]   (default http://127.0.0.1:8081/readyz)
//
// The URL is the last argument, and flags before it are ignored: the NATS image hack/images.sh
// builds has it as wget too, so that the compose file's probe (wget -q -O /dev/null URL) works
// on that image and on the official one alike.
//
// It is a module of its own, outside the workspace: build it with GOWORK=off.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

const defaultURL = "http://127.0.0.1:8081/readyz"

func main() {
	url := defaultURL
	if len(os.Args) > 1 {
		url = os.Args[len(os.Args)-1]
	}
	if err := probe(url, 3*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func probe(url string, timeout time.Duration) error {
	client := &http.Client{Timeout: timeout}
	resp, err := client.Get(url)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %s: %s", url, resp.Status, body)
	}
	return nil
}
