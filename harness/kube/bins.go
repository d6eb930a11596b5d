package kube

import (
	"fmt"
	"os"
	"path/filepath"
)

// Versions of the binaries hack/kube-bins.sh builds; they name the cache directory.
const (
	KubeVersion = "v1.36.3"
	EtcdVersion = "v3.6.16"
)

// EnvBinDir names a directory holding kube-apiserver, kube-controller-manager and etcd, used
// instead of the build cache.
const EnvBinDir = "FLOTILLA_KUBE_BIN_DIR"

// Binaries a member environment runs (kubectl is built too, for people, but not needed here).
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

// BinDir returns the directory holding the Kubernetes binaries: $FLOTILLA_KUBE_BIN_DIR, else the
// cache hack/kube-bins.sh fills, ${XDG_CACHE_HOME:-~/.cache}/flotilla/bin/kube-<v>-etcd-<v>.
func BinDir() (string, error) {
	if dir := os.Getenv(EnvBinDir); dir != "" {
		if err := hasBinaries(dir); err != nil {
			return "", fmt.Errorf("kubernetes binaries in $%s=%s: %w", EnvBinDir, dir, err)
		}
		return dir, nil
	}
	cache := os.Getenv("FLOTILLA_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir() // $XDG_CACHE_HOME or ~/.cache on Linux
		if err != nil {
			return "", fmt.Errorf("kubernetes binaries: %w; set %s", err, EnvBinDir)
		}
		cache = filepath.Join(base, "flotilla")
	}
	dir := filepath.Join(cache, "bin", "kube-"+KubeVersion+"-etcd-"+EtcdVersion)
	if err := hasBinaries(dir); err != nil {
		return "", fmt.Errorf("kubernetes binaries: %w: run `make kube-bins` (hack/kube-bins.sh builds them once, "+
			"about 10 minutes on 2 cores) or set %s", err, EnvBinDir)
	}
	return dir, nil
}

func hasBinaries(dir string) error {
	for _, b := range Binaries {
		p := filepath.Join(dir, b)
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("no %s in %s", b, dir)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not executable", p)
		}
	}
	return nil
}
