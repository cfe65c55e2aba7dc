package kube

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the certificate material of one cluster: a cluster CA that signs
// the API servers' serving certificate, a front-proxy CA that kube-apiserver
// requires for its request-header authenticator, and the service-account
// signing key pair. Everything is generated fresh for each cluster and lives
// in its directory.
type pki struct {
	dir string
	// CAFile is the cluster CA certificate every client trusts.
	CAFile string
	// CAPEM is its content.
	CAPEM []byte
	// ServingCert and ServingKey: the API servers' serving certificate
	// (one for all of them, valid for every API server address).
	ServingCert, ServingKey string
	// FrontProxyCA signs nothing podsafe uses; kube-apiserver needs one.
	FrontProxyCA string
	// SAKey and SAPub: the service-account token signing key pair.
	SAKey, SAPub string
	// EtcdCert and EtcdKey are each etcd member's certificate and key,
	// serving its clients and peers and presented to its peers.
	EtcdCert, EtcdKey []string
	// EtcdClientCert and EtcdClientKey: the client certificate the API
	// servers (and the harness) present to etcd.
	EtcdClientCert, EtcdClientKey string
}

// certLifetime is long enough for any run and short enough that a left-over
// directory's keys are soon worthless.
const certLifetime = 7 * 24 * time.Hour

// newPKI writes the material into dir/pki for API servers reachable at
// addrs (plus localhost and the in-cluster service names) and etcd members
// at etcd: etcd serves its clients and peers over TLS and requires client
// certificates of both, as kubeadm sets it up.
func newPKI(dir string, addrs, etcd []net.IP) (*pki, error) {
	p := &pki{dir: filepath.Join(dir, "pki")}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating pki directory: %w", err)
	}
	caKey, caCert, caPEM, err := selfSignedCA("podsafe-cluster-ca")
	if err != nil {
		return nil, err
	}
	p.CAPEM = caPEM
	if p.CAFile, err = p.write("ca.crt", caPEM); err != nil {
		return nil, err
	}
	ips := append([]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)}, addrs...)
	dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	certPEM, keyPEM, err := signedCert(caKey, caCert, "kube-apiserver", dns, ips, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	if p.ServingCert, err = p.write("apiserver.crt", certPEM); err != nil {
		return nil, err
	}
	if p.ServingKey, err = p.write("apiserver.key", keyPEM); err != nil {
		return nil, err
	}
	for i, ip := range etcd {
		name := fmt.Sprintf("etcd-%d", i)
		certPEM, keyPEM, err := signedCert(caKey, caCert, name, []string{"localhost", name}, []net.IP{ip, net.ParseIP("127.0.0.1")},
			x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
		if err != nil {
			return nil, err
		}
		crt, err := p.write(name+".crt", certPEM)
		if err != nil {
			return nil, err
		}
		key, err := p.write(name+".key", keyPEM)
		if err != nil {
			return nil, err
		}
		p.EtcdCert, p.EtcdKey = append(p.EtcdCert, crt), append(p.EtcdKey, key)
	}
	certPEM, keyPEM, err = signedCert(caKey, caCert, "kube-apiserver-etcd-client", nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	if p.EtcdClientCert, err = p.write("etcd-client.crt", certPEM); err != nil {
		return nil, err
	}
	if p.EtcdClientKey, err = p.write("etcd-client.key", keyPEM); err != nil {
		return nil, err
	}
	_, _, fpPEM, err := selfSignedCA("podsafe-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	if p.FrontProxyCA, err = p.write("front-proxy-ca.crt", fpPEM); err != nil {
		return nil, err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generating the service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encoding the service-account key: %w", err)
	}
	if p.SAKey, err = p.write("sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(sa)})); err != nil {
		return nil, err
	}
	if p.SAPub, err = p.write("sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) write(name string, data []byte) (string, error) {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", name, err)
	}
	return path, nil
}

func serial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return s, nil
}

func selfSignedCA(cn string) (*ecdsa.PrivateKey, *x509.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generating the %s key: %w", cn, err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"podsafe"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("signing the %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parsing the %s: %w", cn, err)
	}
	return key, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// signedCert makes a key and a certificate for cn, signed by ca, valid for
// the names and addresses given and for usages.
func signedCert(caKey crypto.Signer, ca *x509.Certificate, cn string, dns []string, ips []net.IP, usages ...x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the %s key: %w", cn, err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"podsafe"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usages,
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the %s certificate: %w", cn, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the %s key: %w", cn, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
