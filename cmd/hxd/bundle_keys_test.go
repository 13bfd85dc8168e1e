package main

import (
	"archive/zip"
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxbundle"
)

// kidOf reads the hxd.signature kid of a bundle's manifest ("" if none).
func kidOf(t *testing.T, data []byte) string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	rc, err := zr.Open("manifest.json")
	require.NoError(t, err)
	defer func() { _ = rc.Close() }()
	var m struct {
		HXD struct {
			Signature *struct{ Kid string } `json:"signature"`
		} `json:"hxd"`
	}
	require.NoError(t, json.NewDecoder(rc).Decode(&m))
	if m.HXD.Signature == nil {
		return ""
	}
	return m.HXD.Signature.Kid
}

// rezipManifest rewrites a bundle with edit applied to its manifest.
func rezipManifest(t *testing.T, data []byte, edit func([]byte) []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		rc, err := f.Open()
		require.NoError(t, err)
		b, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		if f.Name == "manifest.json" {
			b = edit(b)
		}
		w, err := zw.Create(f.Name)
		require.NoError(t, err)
		_, err = w.Write(b)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return out.Bytes()
}

// kidLine is what keygen prints.
var kidLine = regexp.MustCompile(`(?m)^kid: ([A-Za-z0-9_-]{43})$`)

// TestKeygen: a PKCS#8 PEM of mode 0600, its kid printed; an existing
// file is kept unless --force.
func TestKeygen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "k.pem")
	res := runCLI(t, "keygen", "--output", key)
	require.Equal(t, 0, res.code, res.stderr)
	m := kidLine.FindStringSubmatch(res.stdout)
	require.NotNil(t, m, res.stdout)
	st, err := os.Stat(key)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	first, err := os.ReadFile(key)
	require.NoError(t, err)
	signer, err := readSigningKey(key)
	require.NoError(t, err)
	require.Equal(t, m[1], signer.Kid())

	res = runCLI(t, "keygen", "--output", key)
	require.Equal(t, 1, res.code)
	require.Contains(t, res.stderr, "already exists")
	again, err := os.ReadFile(key)
	require.NoError(t, err)
	require.Equal(t, first, again, "kept")

	res = runCLI(t, "keygen", "--output", key, "--force")
	require.Equal(t, 0, res.code, res.stderr)
	replaced, err := os.ReadFile(key)
	require.NoError(t, err)
	require.NotEqual(t, first, replaced)
	st, err = os.Stat(key)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left")

	require.Equal(t, 2, runCLI(t, "keygen").code)
	require.Equal(t, 2, runCLI(t, "keygen", "--output", key, "extra").code)
}

// TestEnsureSigningKey: the generated key is created once (0600, its
// folder 0700) and kept; a key another process linked first is the one
// used, and a losing writer leaves no temporary file.
func TestEnsureSigningKey(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "hxd.db.hxd")
	path, err := ensureSigningKey(dir)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, defaultSigningKeyName), path)
	st, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	st, err = os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	first, err := os.ReadFile(path)
	require.NoError(t, err)
	_, err = readSigningKey(path)
	require.NoError(t, err)

	again, err := ensureSigningKey(dir)
	require.NoError(t, err)
	require.Equal(t, path, again)
	kept, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, first, kept)

	// The race ensureSigningKey tolerates: another process linked first.
	err = writeKeyFile(path, []byte("other"), false)
	require.ErrorIs(t, err, fs.ErrExist)
	kept, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, first, kept)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left")
}

// TestSigningKeyRequiredWhenShared: PostgreSQL and Temporal refuse to
// start (and export refuses to run) without --bundle-signing-key, naming
// the flag and `hxd keygen`; nothing is connected to.
func TestSigningKeyRequiredWhenShared(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--database-url", "postgres://postgres@127.0.0.1:1/none?sslmode=disable"},
		append([]string{"serve", "--addr", "127.0.0.1:0", "--engine", "temporal"}, temporalArgs...),
		{"export", "--database-url", "postgres://postgres@127.0.0.1:1/none?sslmode=disable", "--session", "s", "--run", "r",
			"--output", filepath.Join(t.TempDir(), "x.hx")},
	} {
		res := runCLIEnv(t, map[string]string{"HXD_S3_ACCESS_KEY": "ak", "HXD_S3_SECRET_KEY": "sk"}, args...)
		require.Equal(t, 2, res.code, "%v: %s", args, res.stderr)
		require.Contains(t, res.stderr, "--bundle-signing-key", args)
		require.Contains(t, res.stderr, "hxd keygen", args)
	}
	// With a key, PostgreSQL serve gets past the key check (and fails on
	// the unreachable database instead).
	key := filepath.Join(t.TempDir(), "k.pem")
	require.Equal(t, 0, runCLI(t, "keygen", "--output", key).code)
	res := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--database-url", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1",
		"--bundle-signing-key", key)
	require.NotContains(t, res.stderr, "hxd keygen")
	require.NotEqual(t, 0, res.code)
}

// TestSignedExportsAndVerifyTrust: on SQLite the key is generated once in
// <db>.hxd and reused across restarts and by `hxd export`; the server
// publishes it; HTTP and CLI exports are signed; `hxd verify --trust`
// exits 0/1 when the signature is valid, 3 when it is not valid for a
// trusted key and 2 for an invalid bundle.
func TestSignedExportsAndVerifyTrust(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "hxd.db")
	d := startDaemon(t, db)
	sid, rid := recordedRun(t, d, "invoice-analyst", true, "Analyze overdue invoices for the demo account")
	keyFile := db + ".hxd/bundle-signing-key.pem"
	st, err := os.Stat(keyFile)
	require.NoError(t, err, "generated at first start")
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	generated, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	signer, err := readSigningKey(keyFile)
	require.NoError(t, err)

	resp, body := d.do(t, http.MethodGet, "/.well-known/hxd-bundle-keys", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.NotEmpty(t, resp.Header.Get("Cache-Control"))
	var jwks hxbundle.JWKS
	require.NoError(t, json.Unmarshal(body, &jwks))
	require.Len(t, jwks.Keys, 1)
	require.Equal(t, signer.Kid(), jwks.Keys[0].Kid)

	resp, full := export(t, d, rid, map[string]any{"include_payloads": true})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(full))
	require.Equal(t, signer.Kid(), kidOf(t, full))
	rep := verifyOverHTTP(t, d, full)
	require.True(t, rep.Complete)
	_, body = upload(t, d, "/bundles/verify", full)
	require.Contains(t, string(body), `"signature":{"kid":"`+signer.Kid()+`","status":"valid"}`)

	// Restarted: the same key.
	d.stop()
	d = startDaemon(t, db)
	resp, again := export(t, d, rid, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(again))
	require.Equal(t, signer.Kid(), kidOf(t, again))
	now, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	require.Equal(t, generated, now, "reused, never regenerated")

	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	fullPath := write("full.hx", full)
	metaPath := write("meta.hx", again)
	jwksFile := write("server.jwks", mustGet(t, d.base+"/.well-known/hxd-bundle-keys"))

	// The CLI export of the same SQLite store signs with the same key; with
	// --bundle-signing-key, with that one.
	d.stop()
	cliOut := filepath.Join(dir, "cli.hx")
	res := runCLI(t, "export", "--db", db, "--session", sid, "--run", rid, "--output", cliOut, "--include-payloads")
	require.Equal(t, 0, res.code, res.stderr)
	cliData, err := os.ReadFile(cliOut)
	require.NoError(t, err)
	require.Equal(t, signer.Kid(), kidOf(t, cliData))
	other := filepath.Join(dir, "other.pem")
	res = runCLI(t, "keygen", "--output", other)
	require.Equal(t, 0, res.code, res.stderr)
	otherKid := kidLine.FindStringSubmatch(res.stdout)[1]
	otherOut := filepath.Join(dir, "other.hx")
	res = runCLI(t, "export", "--db", db, "--session", sid, "--run", rid, "--output", otherOut, "--include-payloads", "--bundle-signing-key", other)
	require.Equal(t, 0, res.code, res.stderr)
	otherData, err := os.ReadFile(otherOut)
	require.NoError(t, err)
	require.Equal(t, otherKid, kidOf(t, otherData))

	tampered := write("tampered.hx", rezipManifest(t, full, func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"sdk_version":"`), []byte(`"sdk_version":"x`), 1)
	}))
	unsigned := write("unsigned.hx", rezipManifest(t, full, func(b []byte) []byte {
		return regexp.MustCompile(`,"signature":\{[^}]*\}`).ReplaceAll(b, nil)
	}))
	require.Empty(t, kidOf(t, mustRead(t, unsigned)))
	garbage := write("garbage.hx", []byte("not a zip"))

	// A server serving the keys for --trust URL.
	d = startDaemon(t, db)
	trustURL := d.base + "/.well-known/hxd-bundle-keys"
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		status string
	}{
		{"no trust: unknown_key, exit as before", []string{fullPath}, 0, "unknown_key"},
		{"trusted JWKS file", []string{"--trust", jwksFile, fullPath}, 0, "valid"},
		{"trusted URL", []string{"--trust", trustURL, fullPath}, 0, "valid"},
		{"trusted private key file (its public key)", []string{"--trust", keyFile, cliOut}, 0, "valid"},
		{"valid signature, incomplete: 1", []string{"--trust", trustURL, metaPath}, 1, "valid"},
		{"untrusted key: 3", []string{"--trust", other, fullPath}, 3, "unknown_key"},
		{"either of two keys", []string{"--trust", other, "--trust", jwksFile, fullPath}, 0, "valid"},
		{"other key trusted", []string{"--trust", other, otherOut}, 0, "valid"},
		{"changed after signing: 3", []string{"--trust", trustURL, tampered}, 3, "invalid"},
		{"changed, no trust: unknown_key (no key to check with)", []string{tampered}, 0, "unknown_key"},
		{"signature removed: 3", []string{"--trust", trustURL, unsigned}, 3, "absent"},
		{"invalid bundle: 2 wins", []string{"--trust", trustURL, garbage}, 2, ""},
	} {
		res := runCLI(t, append([]string{"verify", "--json"}, tc.args...)...)
		require.Equal(t, tc.code, res.code, "%s: %s %s", tc.name, res.stdout, res.stderr)
		var rep struct {
			Valid     bool                      `json:"valid"`
			Signature *hxbundle.SignatureReport `json:"signature"`
		}
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep), tc.name)
		if tc.status == "" {
			require.Nil(t, rep.Signature, tc.name)
			continue
		}
		require.True(t, rep.Valid, tc.name)
		require.Equal(t, tc.status, rep.Signature.Status, tc.name)
		text := runCLI(t, append([]string{"verify"}, tc.args...)...)
		require.Equal(t, tc.code, text.code, tc.name)
		require.Contains(t, text.stdout, "\nsignature: "+tc.status, tc.name)
	}
	// A --trust that cannot be read is an error (exit 2), never "trusted".
	for _, bad := range []string{filepath.Join(dir, "none.pem"), garbage, d.base + "/nope"} {
		res := runCLI(t, "verify", "--trust", bad, fullPath)
		require.Equal(t, 2, res.code, bad)
		require.Contains(t, res.stderr, "--trust", bad)
	}
}

func mustGet(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // a test against a local daemon
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return b
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// TestBundleVerifyKeysDir: --bundle-verify-keys DIR adds the keys of its
// PEM and JWKS files to the published and trusted keys, each kid derived
// from the key (a file's own kid is ignored); an unreadable key file
// stops start-up.
func TestBundleVerifyKeysDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyA, keyB := testSigningKey(t), testSigningKey(t)
	a, err := readSigningKey(keyA)
	require.NoError(t, err)
	b, err := readSigningKey(keyB)
	require.NoError(t, err)
	pkix, err := x509.MarshalPKIXPublicKey(a.PublicKey())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.pem"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix}), 0o600))
	jwk := hxbundle.NewKeySet(b.PublicKey()).JWKS()
	jwk.Keys[0].Kid = a.Kid() // a lie: ignored
	data, err := json.Marshal(jwk)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.json"), data, 0o600))

	signing := testSigningKey(t)
	signer, err := readSigningKey(signing)
	require.NoError(t, err)
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"), "--bundle-signing-key", signing, "--bundle-verify-keys", dir)
	var got hxbundle.JWKS
	require.NoError(t, json.Unmarshal(mustGet(t, d.base+"/.well-known/hxd-bundle-keys"), &got))
	var kids []string
	for _, k := range got.Keys {
		kids = append(kids, k.Kid)
	}
	require.Equal(t, []string{signer.Kid(), a.Kid(), b.Kid()}, kids)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.pem"), []byte("not a key"), 0o600))
	res := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "x.db"), "--bundle-verify-keys", dir)
	require.Equal(t, 2, res.code, res.stderr)
	require.Contains(t, res.stderr, "bad.pem")
}
