package idem

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// Over TLS the flight's socket deadline is the TLS connection's (pgconn.Conn() is the
// *tls.Conn): the stalled claim and completion flights end at the flight timeout with the
// same errors, no deadline stays on the connection, and business statements longer than
// the flight timeout complete. The test cluster gets a self-signed certificate and
// ssl = on (sslmode=disable clients, every other test, are unaffected).
func TestFlightDeadlineOverTLS(t *testing.T) {
	cluster := pgtest.Cluster()
	if cluster == nil {
		t.Skip("DATABASE_URL is set: the test turns TLS on in a throwaway cluster of its own")
	}
	enableTLS(t, cluster.DataDir())
	url := pgtest.NewDB(t)
	e := newEnvOn(t, url)
	pool := oneConnPool(t, strings.Replace(url, "sslmode=disable", "sslmode=require", 1), nil)
	e.store = NewStore(pool, WithFlightTimeout(flightTimeout))
	c, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := socketOf(t, c).Conn.(*tls.Conn); !ok {
		t.Fatalf("the store's connection is not TLS: %T", socketOf(t, c).Conn)
	}
	c.Release()

	e.stalledFlights(t)
	slow := func(ctx context.Context, tx Tx) (*Response, error) {
		if _, err := tx.Exec(ctx, "SELECT pg_sleep($1::float8)", (flightTimeout * 3 / 2).Seconds()); err != nil {
			return nil, err
		}
		return insertOne("y")(ctx, tx)
	}
	for _, iso := range []pgx.TxIsoLevel{"", pgx.Serializable} {
		q := policy("createThing")
		q.Isolation = iso
		if r := e.do(q, "slow-"+string(iso), "y", slow); r.Outcome != OutcomeCompleted {
			t.Fatalf("slow business over TLS (%q): %s, want completed", iso, r.Outcome)
		}
		e.nextUserOutlivesFlightTimeout(t, "a slow business over TLS")
	}
}

// enableTLS gives the cluster in dataDir a self-signed certificate and turns ssl on
// (reloaded), then waits until a TLS connection is accepted.
func enableTLS(t *testing.T, dataDir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	owner := st.Sys().(*syscall.Stat_t)
	certPath, keyPath := filepath.Join(dataDir, "idem-test.crt"), filepath.Join(dataDir, "idem-test.key")
	for path, block := range map[string]*pem.Block{
		certPath: {Type: "CERTIFICATE", Bytes: der},
		keyPath:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, int(owner.Uid), int(owner.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, stmt := range []string{
		"ALTER SYSTEM SET ssl_cert_file = '" + certPath + "'",
		"ALTER SYSTEM SET ssl_key_file = '" + keyPath + "'",
		"ALTER SYSTEM SET ssl = on",
		"SELECT pg_reload_conf()",
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	// The postmaster applies the reload asynchronously: wait for TLS to be accepted.
	tlsURL := strings.Replace(pgtest.URL(t), "sslmode=disable", "sslmode=require", 1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := pgx.Connect(ctx, tlsURL)
		if err == nil {
			c.Close(ctx)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("TLS connections still refused after ssl = on: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
