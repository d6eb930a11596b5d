package hubsync

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// webhookSecret holds the webhook's CA and serving certificate on the hub, so that every
// replica serves the same certificate and the hub trusts it through one caBundle.
const webhookSecret = "flotilla-hubsync-webhook"

// Certificate lifetimes: a new pair is made at start when the one kept has under
// renewBefore left or does not name the webhook's host.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	certLifetime = 2 * 365 * 24 * time.Hour
	renewBefore  = 30 * 24 * time.Hour
)

// servingCert returns the webhook's serving certificate for hosts and the CA that signed it,
// from the hub's Secret, made (and stored) when there is none fit for use. Replicas starting
// together race on the Secret's creation; the loser reads the winner's.
func servingCert(ctx context.Context, kube kubernetes.Interface, namespace string, hosts []string) (tls.Certificate, []byte, error) {
	for range 3 {
		s, err := kube.CoreV1().Secrets(namespace).Get(ctx, webhookSecret, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			s = nil
		case err != nil:
			return tls.Certificate{}, nil, fmt.Errorf("read secret %s/%s: %w", namespace, webhookSecret, err)
		}
		if s != nil {
			if cert, ca, ok := usable(s, hosts); ok {
				return cert, ca, nil
			}
		}
		caPEM, certPEM, keyPEM, err := makeCerts(hosts)
		if err != nil {
			return tls.Certificate{}, nil, err
		}
		data := map[string][]byte{"ca.crt": caPEM, corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}
		if s == nil {
			s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: webhookSecret, Namespace: namespace}, Type: corev1.SecretTypeTLS, Data: data}
			_, err = kube.CoreV1().Secrets(namespace).Create(ctx, s, metav1.CreateOptions{FieldManager: fieldManager})
		} else {
			s.Data = data
			_, err = kube.CoreV1().Secrets(namespace).Update(ctx, s, metav1.UpdateOptions{FieldManager: fieldManager})
		}
		if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
			continue // another replica stored its pair: use that one
		}
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("store secret %s/%s: %w", namespace, webhookSecret, err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		return cert, caPEM, err
	}
	return tls.Certificate{}, nil, fmt.Errorf("secret %s/%s keeps changing under hubsync", namespace, webhookSecret)
}

// usable returns the Secret's pair when it names every host and is not about to expire.
func usable(s *corev1.Secret, hosts []string) (tls.Certificate, []byte, bool) {
	cert, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil || len(s.Data["ca.crt"]) == 0 {
		return tls.Certificate{}, nil, false
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil || time.Until(leaf.NotAfter) < renewBefore {
		return tls.Certificate{}, nil, false
	}
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			return tls.Certificate{}, nil, false
		}
	}
	return cert, s.Data["ca.crt"], true
}

// makeCerts makes a CA and a serving certificate for hosts (IP addresses or DNS names).
func makeCerts(hosts []string) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("webhook CA key: %w", err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "flotilla-hubsync-webhook-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caLifetime),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("webhook CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("webhook key: %w", err)
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "flotilla-hubsync-webhook"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range slices.Compact(slices.Sorted(slices.Values(hosts))) {
		if ip := net.ParseIP(h); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, h)
		}
	}
	caCert, _ := x509.ParseCertificate(caDER)
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("webhook certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("webhook key: %w", err)
	}
	return pemOf("CERTIFICATE", caDER), pemOf("CERTIFICATE", der), pemOf("EC PRIVATE KEY", keyDER), nil
}

func pemOf(typ string, der []byte) []byte {
	var b bytes.Buffer
	_ = pem.Encode(&b, &pem.Block{Type: typ, Bytes: der})
	return b.Bytes()
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}
