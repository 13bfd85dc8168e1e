package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"hxd/internal/hxbundle"
)

// Bundle signing keys (issue 23): every export is signed. The key is
// --bundle-signing-key (a PKCS#8 PEM made by `hxd keygen`); without it a
// SQLite store keeps one generated at first use in its data folder
// (<db>.hxd/bundle-signing-key.pem, 0600), while PostgreSQL and Temporal,
// whose processes must all share one key, refuse to start.

// defaultSigningKeyName is the generated key's file in "<db>.hxd".
const defaultSigningKeyName = "bundle-signing-key.pem"

// errNoSigningKey: a shared store without --bundle-signing-key.
var errNoSigningKey = errors.New("--bundle-signing-key (HXD_BUNDLE_SIGNING_KEY) is required with PostgreSQL or Temporal, " +
	"where every process must sign with one shared key: create one with `hxd keygen --output FILE`")

// bundleKeyConfig is --bundle-signing-key and --bundle-verify-keys.
type bundleKeyConfig struct {
	// SigningKey is the PKCS#8 PEM private key file. Default: generated
	// in the SQLite data folder; required on PostgreSQL and Temporal.
	SigningKey string
	// VerifyKeys is a folder of extra public keys (PEM or JWKS files),
	// e.g. the keys of before a rotation. Default: none.
	VerifyKeys string
}

// register adds the flags (with verify: --bundle-verify-keys too).
func (c *bundleKeyConfig) register(fs *flag.FlagSet, ef *envFlags, verify bool) {
	fs.StringVar(&c.SigningKey, "bundle-signing-key", "", "PKCS#8 PEM Ed25519 key signing every bundle, made by `hxd keygen` "+
		"(HXD_BUNDLE_SIGNING_KEY); default with SQLite: generated once in <db>.hxd/; required with PostgreSQL and Temporal")
	ef.bind("bundle-signing-key", "HXD_BUNDLE_SIGNING_KEY")
	if verify {
		fs.StringVar(&c.VerifyKeys, "bundle-verify-keys", "", "folder of extra trusted and published public keys, PEM or JWKS files "+
			"(HXD_BUNDLE_VERIFY_KEYS), e.g. the keys of before a rotation")
		ef.bind("bundle-verify-keys", "HXD_BUNDLE_VERIFY_KEYS")
	}
}

// validate refuses a shared store (PostgreSQL or Temporal) without a key.
func (c *bundleKeyConfig) validate(shared bool) error {
	if shared && c.SigningKey == "" {
		return errNoSigningKey
	}
	return nil
}

// load returns the signer and the trusted keys (the signer's, then those
// of VerifyKeys). sqliteDB is the SQLite file when the store is one
// (else ""): without SigningKey, its generated key is read or created.
func (c *bundleKeyConfig) load(sqliteDB string) (*hxbundle.Signer, *hxbundle.KeySet, error) {
	path := c.SigningKey
	if path == "" {
		if sqliteDB == "" {
			return nil, nil, errNoSigningKey
		}
		var err error
		if path, err = ensureSigningKey(sqliteDB + ".hxd"); err != nil {
			return nil, nil, err
		}
	}
	signer, err := readSigningKey(path)
	if err != nil {
		return nil, nil, err
	}
	keys := hxbundle.NewKeySet(signer.PublicKey())
	if c.VerifyKeys != "" {
		if err := addKeyDir(keys, c.VerifyKeys); err != nil {
			return nil, nil, err
		}
	}
	return signer, keys, nil
}

// readSigningKey reads a PKCS#8 PEM Ed25519 private key file.
func readSigningKey(path string) (*hxbundle.Signer, error) {
	data, err := readBounded(path)
	if err != nil {
		return nil, fmt.Errorf("read bundle signing key: %w", err)
	}
	key, err := hxbundle.ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("bundle signing key %s: %w", path, err)
	}
	return hxbundle.NewSigner(key)
}

// readBounded reads a key file of at most hxbundle.MaxKeyFileBytes.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, hxbundle.MaxKeyFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > hxbundle.MaxKeyFileBytes {
		return nil, fmt.Errorf("%s: more than %d bytes", path, hxbundle.MaxKeyFileBytes)
	}
	return data, nil
}

// ensureSigningKey returns dir's generated key file, creating dir (0700)
// and the key (0600) if missing. Concurrent first starts agree on one
// key: writeKeyFile links it into place, which fails if another process
// linked first.
func ensureSigningKey(dir string) (string, error) {
	path := filepath.Join(dir, defaultSigningKeyName)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create data folder: %w", err)
	}
	pemKey, err := hxbundle.GenerateKey()
	if err != nil {
		return "", err
	}
	if err := writeKeyFile(path, pemKey, false); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return path, nil
}

// addKeyDir trusts every key of the regular files of dir (PEM or JWKS;
// each kid derived from the key).
func addKeyDir(keys *hxbundle.KeySet, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read --bundle-verify-keys: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := readBounded(path)
		if err != nil {
			return fmt.Errorf("read --bundle-verify-keys: %w", err)
		}
		pubs, err := hxbundle.ParsePublicKeys(data)
		if err != nil {
			return fmt.Errorf("--bundle-verify-keys %s: %w", path, err)
		}
		for _, p := range pubs {
			keys.Add(p)
		}
	}
	return nil
}

// trustFetchTimeout bounds fetching a --trust URL.
const trustFetchTimeout = 10 * time.Second

// loadTrust reads the keys of `hxd verify --trust`: a file or an
// http(s) URL (fetched within trustFetchTimeout, at most
// hxbundle.MaxKeyFileBytes), holding PEM keys or a JWKS.
func loadTrust(ctx context.Context, keys *hxbundle.KeySet, src string) error {
	var data []byte
	var err error
	if u, perr := url.Parse(src); perr == nil && (u.Scheme == "http" || u.Scheme == "https") {
		data, err = fetchKeys(ctx, u.String())
	} else {
		data, err = readBounded(src)
	}
	if err != nil {
		return fmt.Errorf("--trust: %w", err)
	}
	pubs, err := hxbundle.ParsePublicKeys(data)
	if err != nil {
		return fmt.Errorf("--trust %s: %w", src, err)
	}
	for _, p := range pubs {
		keys.Add(p)
	}
	return nil
}

// fetchKeys GETs a JWKS or PEM document.
func fetchKeys(ctx context.Context, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, trustFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json, application/x-pem-file")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, hxbundle.MaxKeyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(data) > hxbundle.MaxKeyFileBytes {
		return nil, fmt.Errorf("GET %s: more than %d bytes", u, hxbundle.MaxKeyFileBytes)
	}
	return data, nil
}

const keygenUsage = `Usage:
  hxd keygen --output FILE [--force]

Creates an Ed25519 bundle signing key, a PKCS#8 PEM file of mode 0600, for
hxd serve/export --bundle-signing-key, and prints its kid (the RFC 7638
thumbprint that bundles it signs name). An existing file is kept unless
--force. Exit code 0 on success, 1 on failure, 2 on bad usage.

Flags:
`

// keygenCmd is `hxd keygen --output FILE [--force]`.
func keygenCmd(args []string, e env) error {
	flags := flag.NewFlagSet("keygen", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	flags.Usage = func() { fmt.Fprint(e.stderr, keygenUsage); flags.PrintDefaults() }
	output := flags.String("output", "", "key file to create (required)")
	force := flags.Bool("force", false, "replace an existing file")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &exitError{code: 0}
		}
		return &exitError{code: 2, err: err}
	}
	if flags.NArg() > 0 {
		return &exitError{code: 2, err: fmt.Errorf("keygen takes no arguments, got %q", flags.Args())}
	}
	if *output == "" || *output == "-" {
		return &exitError{code: 2, err: errors.New("keygen needs --output FILE")}
	}
	pemKey, err := hxbundle.GenerateKey()
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	key, err := hxbundle.ParsePrivateKeyPEM(pemKey)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	signer, err := hxbundle.NewSigner(key)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	if err := writeKeyFile(*output, pemKey, *force); err != nil {
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("%s already exists: keygen never replaces a key unless --force", *output)
		}
		return &exitError{code: 1, err: err}
	}
	fmt.Fprintf(e.stdout, "wrote %s\nkid: %s\n", *output, signer.Kid())
	return nil
}

// writeKeyFile writes data to path with mode 0600: written aside, then
// linked into place (refused if path exists, with an error matching
// fs.ErrExist) or, with force, renamed over it.
func writeKeyFile(path string, data []byte, force bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".hxd-keygen-*.tmp") // mode 0600
	if err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write key: %w", err)
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	if force {
		if err := os.Rename(tmp.Name(), path); err != nil {
			return fmt.Errorf("write key: %w", err)
		}
		return nil
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return fmt.Errorf("write key: %w", err) // *LinkError wrapping EEXIST matches fs.ErrExist
	}
	return nil
}
