package backends

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSFiles names the files of a TLS setup, so that a Config can travel to
// a worker process (a tls.Config cannot) and be loaded there.
type TLSFiles struct {
	// CA is the PEM file of the certificate authority that verifies the
	// servers; empty uses the system's.
	CA string `json:"ca,omitempty"`
	// Cert and Key are the client's certificate and key (PEM), both or
	// neither.
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
	// Insecure skips verifying the servers.
	Insecure bool `json:"insecure,omitempty"`
}

// Load returns the TLS configuration the files describe, or nil when they
// ask for none. The error names the file at fault.
func (t TLSFiles) Load() (*tls.Config, error) {
	if t.CA == "" && t.Cert == "" && t.Key == "" && !t.Insecure {
		return nil, nil
	}
	c := &tls.Config{InsecureSkipVerify: t.Insecure, MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", t.CA)
		}
	}
	if t.Cert != "" || t.Key != "" {
		if t.Cert == "" || t.Key == "" {
			return nil, fmt.Errorf("client certificate %q and key %q: give both", t.Cert, t.Key)
		}
		pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
