package hxbundle

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
)

// signTestKey returns a fixed Ed25519 key from seed byte b.
func signTestKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func signTestSigner(t *testing.T, b byte) *Signer {
	t.Helper()
	s, err := NewSigner(signTestKey(b))
	require.NoError(t, err)
	return s
}

// signBuild exports the golden source signed by s (nil: unsigned).
func signBuild(t *testing.T, s *Signer) exBundle {
	t.Helper()
	a, _ := exBuild(t, exInfo(), exGoldenSource(), Policy{IncludePayloads: true, IncludeArtifacts: true, Signer: s})
	return exReadBundle(t, a)
}

// signRezip re-zips b's members in their order after edit, re-sealing
// every member's digest and size in the manifest, as a tamperer would.
func signRezip(t *testing.T, b exBundle, editManifest func(m map[string]any), editMember func(name string, data []byte) []byte) []byte {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b.members[memberManifest]))
	d.UseNumber()
	var m map[string]any
	require.NoError(t, d.Decode(&m))
	var fs []file
	members := map[string]any{}
	for _, name := range b.names {
		if name == memberManifest {
			continue
		}
		data := b.members[name]
		if editMember != nil {
			data = editMember(name, data)
		}
		sum := sha256.Sum256(data)
		members[name] = map[string]any{"sha256": hex.EncodeToString(sum[:]), "size": len(data)}
		fs = append(fs, file{name, data})
	}
	m["members"] = members
	if editManifest != nil {
		editManifest(m)
	}
	man, err := journal.Canonical(m)
	require.NoError(t, err)
	return zipStored(t, append(fs, file{memberManifest, man}))
}

func verifyKeys(data []byte, keys *KeySet) Report {
	return VerifyWithKeys(bytes.NewReader(data), int64(len(data)), DefaultLimits, keys)
}

// TestThumbprint: the kid is RFC 7638's thumbprint (RFC 8037 appendix
// A.3 gives the one of its example key).
func TestThumbprint(t *testing.T) {
	t.Parallel()
	x, err := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	require.NoError(t, err)
	require.Equal(t, "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k", Thumbprint(ed25519.PublicKey(x)))
}

// TestSignRoundTrip: a signed export verifies valid for its key, and the
// signature sits in hxd.signature as {alg, kid, sig}.
func TestSignRoundTrip(t *testing.T) {
	t.Parallel()
	s := signTestSigner(t, 1)
	b := signBuild(t, s)
	hxd, _ := b.manifest["hxd"].(map[string]any)
	sig, _ := hxd["signature"].(map[string]any)
	require.Equal(t, "EdDSA", sig["alg"])
	require.Equal(t, s.Kid(), sig["kid"])
	raw, err := base64.RawURLEncoding.Strict().DecodeString(sig["sig"].(string))
	require.NoError(t, err)
	require.Len(t, raw, ed25519.SignatureSize)
	exRequireCanonical(t, b.members[memberManifest])

	r := verifyKeys(b.raw, NewKeySet(s.PublicKey()))
	require.True(t, r.Valid)
	require.Equal(t, &SignatureReport{Status: SignatureValid, Kid: s.Kid()}, r.Signature)
	// Playback's manifest gives the same verdict.
	p, err := Playback(bytes.NewReader(b.raw), int64(len(b.raw)), DefaultLimits)
	require.NoError(t, err)
	require.Equal(t, SignatureValid, CheckSignature(p.Manifest, NewKeySet(s.PublicKey())).Status)
}

// TestSignKeepsReferenceVerdict: signing adds only hxd.signature to the
// manifest (an extra key inside "hxd", which REFERENCE §7 allows and
// ignores): every other member is byte for byte the unsigned export,
// the manifest keeps the reference's key set, and the verdict (valid,
// complete, issues) is the unsigned golden's.
func TestSignKeepsReferenceVerdict(t *testing.T) {
	t.Parallel()
	for _, p := range []Policy{{IncludePayloads: true, IncludeArtifacts: true}, {}} {
		signed := p
		signed.Signer = signTestSigner(t, 2)
		ua, _ := exBuild(t, exInfo(), exGoldenSource(), p)
		sa, _ := exBuild(t, exInfo(), exGoldenSource(), signed)
		u, s := exReadBundle(t, ua), exReadBundle(t, sa)
		require.Equal(t, u.names, s.names)
		for _, name := range u.names {
			if name != memberManifest {
				require.Equal(t, u.members[name], s.members[name], name)
			}
		}
		require.Equal(t, exManifestKeys, exSortedKeys(s.manifest))
		hxd := s.manifest["hxd"].(map[string]any)
		require.NotNil(t, hxd["signature"])
		delete(hxd, "signature")
		require.Equal(t, u.manifest, s.manifest)

		ur := Verify(ua.ReaderAt(), ua.Size(), DefaultLimits)
		sr := Verify(sa.ReaderAt(), sa.Size(), DefaultLimits)
		require.True(t, sr.Valid)
		require.Equal(t, ur, sr)
		require.Nil(t, sr.Signature, "Verify alone reports no signature")
		// The committed unsigned goldens still match the unsigned export.
		want, err := os.ReadFile(filepath.Join("testdata", map[bool]string{true: "export-complete.hx", false: "export-metadata-only.hx"}[p.IncludePayloads]))
		require.NoError(t, err)
		got, err := io.ReadAll(io.NewSectionReader(ua.ReaderAt(), 0, ua.Size()))
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

// TestSignTamperMatrix: what each change after signing does to the
// signature verdict, while Valid keeps the reference's meaning.
func TestSignTamperMatrix(t *testing.T) {
	t.Parallel()
	oldKey := signTestSigner(t, 3)
	newKey := signTestSigner(t, 4)
	other := signTestSigner(t, 5)
	signedOld := signBuild(t, oldKey)
	signedNew := signBuild(t, newKey)
	unsigned := signBuild(t, nil)
	sigOf := func(m map[string]any) map[string]any {
		return m["hxd"].(map[string]any)["signature"].(map[string]any)
	}
	trusted := NewKeySet(oldKey.PublicKey())
	rotated := NewKeySet(newKey.PublicKey(), oldKey.PublicKey())
	for _, tc := range []struct {
		name    string
		bundle  func(t *testing.T) []byte
		keys    *KeySet
		status  string
		kid     string
		invalid bool // Report.Valid is false: no signature verdict
	}{
		{name: "untouched", bundle: func(*testing.T) []byte { return signedOld.raw },
			keys: trusted, status: SignatureValid, kid: oldKey.Kid()},
		{name: "re-zipped unchanged", bundle: func(t *testing.T) []byte { return signRezip(t, signedOld, nil, nil) },
			keys: trusted, status: SignatureValid, kid: oldKey.Kid()},
		{name: "manifest key changed", bundle: func(t *testing.T) []byte {
			return signRezip(t, signedOld, func(m map[string]any) { m["created_at"] = "2030-01-01T00:00:00.000000+00:00" }, nil)
		}, keys: trusted, status: SignatureInvalid, kid: oldKey.Kid()},
		{name: "hxd key changed", bundle: func(t *testing.T) []byte {
			return signRezip(t, signedOld, func(m map[string]any) { m["hxd"].(map[string]any)["redaction_rules"] = 7 }, nil)
		}, keys: trusted, status: SignatureInvalid, kid: oldKey.Kid()},
		{name: "record changed, digests re-sealed", bundle: func(t *testing.T) []byte {
			return signRezip(t, signedOld, nil, func(name string, data []byte) []byte {
				if name != memberRecords {
					return data
				}
				return bytes.Replace(data, []byte("invoice-analyst"), []byte("invoice-analysT"), 1)
			})
		}, keys: trusted, status: SignatureInvalid, kid: oldKey.Kid()},
		{name: "artifact changed, digests re-sealed", bundle: func(t *testing.T) []byte {
			return signRezip(t, signedOld, nil, func(name string, data []byte) []byte {
				if name == memberRecords || name == memberManifest {
					return data
				}
				return append(bytes.Clone(data), 'x')
			})
		}, invalid: true}, // the artifact's key is its digest: the reference rejects it
		{name: "record changed, digests not re-sealed", bundle: func(t *testing.T) []byte {
			return signRezip(t, signedOld, func(m map[string]any) {
				m["members"] = signedOld.manifest["members"]
			}, func(name string, data []byte) []byte {
				return bytes.Replace(data, []byte("invoice-analyst"), []byte("invoice-analysT"), 1)
			})
		}, invalid: true},
		{name: "signature removed", bundle: func(t *testing.T) []byte {
			return signRezip(t, signedOld, func(m map[string]any) { delete(m["hxd"].(map[string]any), "signature") }, nil)
		}, keys: trusted, status: SignatureAbsent},
		{name: "never signed", bundle: func(*testing.T) []byte { return unsigned.raw },
			keys: trusted, status: SignatureAbsent},
		{name: "unknown kid", bundle: func(*testing.T) []byte { return signedOld.raw },
			keys: NewKeySet(other.PublicKey()), status: SignatureUnknownKey, kid: oldKey.Kid()},
		{name: "no trusted keys", bundle: func(*testing.T) []byte { return signedOld.raw },
			keys: nil, status: SignatureUnknownKey, kid: oldKey.Kid()},
		{name: "kid swapped to a trusted key", bundle: func(t *testing.T) []byte {
			return signRezip(t, signedOld, func(m map[string]any) { sigOf(m)["kid"] = other.Kid() }, nil)
		}, keys: NewKeySet(other.PublicKey()), status: SignatureInvalid, kid: other.Kid()},
		{name: "re-signed by an untrusted key", bundle: func(*testing.T) []byte { return signBuild(t, other).raw },
			keys: trusted, status: SignatureUnknownKey, kid: other.Kid()},
		{name: "sig not base64url", bundle: func(t *testing.T) []byte {
			return signRezip(t, signedOld, func(m map[string]any) { sigOf(m)["sig"] = "not/base64+" }, nil)
		}, keys: trusted, status: SignatureInvalid, kid: oldKey.Kid()},
		{name: "sig padded", bundle: func(t *testing.T) []byte {
			return signRezip(t, signedOld, func(m map[string]any) { sigOf(m)["sig"] = sigOf(m)["sig"].(string) + "==" }, nil)
		}, keys: trusted, status: SignatureInvalid, kid: oldKey.Kid()},
		{name: "alg changed", bundle: func(t *testing.T) []byte {
			return signRezip(t, signedOld, func(m map[string]any) { sigOf(m)["alg"] = "none" }, nil)
		}, keys: trusted, status: SignatureInvalid, kid: oldKey.Kid()},
		{name: "signature not an object", bundle: func(t *testing.T) []byte {
			return signRezip(t, signedOld, func(m map[string]any) { m["hxd"].(map[string]any)["signature"] = "x" }, nil)
		}, keys: trusted, status: SignatureInvalid},
		{name: "rotated: old bundle, old key still trusted", bundle: func(*testing.T) []byte { return signedOld.raw },
			keys: rotated, status: SignatureValid, kid: oldKey.Kid()},
		{name: "rotated: new bundle", bundle: func(*testing.T) []byte { return signedNew.raw },
			keys: rotated, status: SignatureValid, kid: newKey.Kid()},
		{name: "rotated: old key retired", bundle: func(*testing.T) []byte { return signedOld.raw },
			keys: NewKeySet(newKey.PublicKey()), status: SignatureUnknownKey, kid: oldKey.Kid()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := verifyKeys(tc.bundle(t), tc.keys)
			if tc.invalid {
				require.False(t, r.Valid)
				require.Nil(t, r.Signature)
				return
			}
			require.True(t, r.Valid, "%+v", r)
			require.Equal(t, &SignatureReport{Status: tc.status, Kid: tc.kid}, r.Signature)
		})
	}
}

// TestParseKeys: the accepted key forms and what is refused.
func TestParseKeys(t *testing.T) {
	t.Parallel()
	priv := signTestKey(6)
	pub := priv.Public().(ed25519.PublicKey)
	pkix, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix})
	pkcs8, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)
	privPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	pub2 := signTestKey(7).Public().(ed25519.PublicKey)
	x := base64.RawURLEncoding.EncodeToString(pub)
	x2 := base64.RawURLEncoding.EncodeToString(pub2)
	jwks, err := json.Marshal(NewKeySet(pub, pub2).JWKS())
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		in   string
		want []ed25519.PublicKey
	}{
		{"PKIX PEM", string(pubPEM), []ed25519.PublicKey{pub}},
		{"two PEM blocks", string(pubPEM) + string(pubPEM), []ed25519.PublicKey{pub, pub}},
		{"PKCS#8 PEM gives its public key", string(privPEM), []ed25519.PublicKey{pub}},
		{"JWKS", string(jwks), []ed25519.PublicKey{pub, pub2}},
		{"JWK", `{"kty":"OKP","crv":"Ed25519","x":"` + x + `"}`, []ed25519.PublicKey{pub}},
		{"JWKS skips other key types", `{"keys":[{"kty":"EC","crv":"P-256","x":"a","y":"b"},{"kty":"OKP","crv":"Ed25519","x":"` + x2 + `"}]}`, []ed25519.PublicKey{pub2}},
		{"a JWK's kid is ignored", `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"trusted","x":"` + x + `"}]}`, []ed25519.PublicKey{pub}},
		{"empty", ``, nil},
		{"garbage", `hello`, nil},
		{"JWKS without Ed25519", `{"keys":[{"kty":"RSA","n":"a","e":"AQAB"}]}`, nil},
		{"empty JWKS", `{"keys":[]}`, nil},
		{"x too short", `{"kty":"OKP","crv":"Ed25519","x":"AAAA"}`, nil},
		{"x padded", `{"kty":"OKP","crv":"Ed25519","x":"` + x + `="}`, nil},
		{"bad JSON", `{"keys":`, nil},
		{"certificate block", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", nil},
		{"PUBLIC KEY of garbage", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", nil},
		{"too large", string(bytes.Repeat([]byte(" "), MaxKeyFileBytes+1)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePublicKeys([]byte(tc.in))
			if tc.want == nil {
				require.ErrorIs(t, err, ErrInvalidKey)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	gen, err := GenerateKey()
	require.NoError(t, err)
	// What GenerateKey writes is standard PKCS#8 (crypto/x509 reads it).
	block, _ := pem.Decode(gen)
	require.NotNil(t, block)
	std, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	require.IsType(t, ed25519.PrivateKey{}, std)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ecDER, err := x509.MarshalPKCS8PrivateKey(ecKey)
	require.NoError(t, err)
	ecPub, err := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	require.NoError(t, err)
	_, err = ParsePublicKeys(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecPub}))
	require.ErrorIs(t, err, ErrInvalidKey, "a P-256 public key")
	for _, tc := range []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"PKCS#8", privPEM, true},
		{"generated", gen, true},
		{"public key", pubPEM, false},
		{"empty", nil, false},
		{"PRIVATE KEY of garbage", []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), false},
		{"P-256 PKCS#8", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}), false},
	} {
		t.Run("private "+tc.name, func(t *testing.T) {
			k, err := ParsePrivateKeyPEM(tc.in)
			if !tc.ok {
				require.ErrorIs(t, err, ErrInvalidKey)
				return
			}
			require.NoError(t, err)
			_, err = NewSigner(k)
			require.NoError(t, err)
		})
	}
	_, err = NewSigner(ed25519.PrivateKey{1, 2})
	require.ErrorIs(t, err, ErrInvalidKey)
}

// TestJWKSOut: the published JWKS names each key by its thumbprint and
// reads back to the same keys.
func TestJWKSOut(t *testing.T) {
	t.Parallel()
	a, b := signTestKey(8).Public().(ed25519.PublicKey), signTestKey(9).Public().(ed25519.PublicKey)
	s := NewKeySet(a, b, a)
	require.Equal(t, 2, s.Len())
	j := s.JWKS()
	require.Len(t, j.Keys, 2)
	require.Equal(t, JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(a), Kid: Thumbprint(a), Alg: "EdDSA", Use: "sig"}, j.Keys[0])
	out, err := json.Marshal(j)
	require.NoError(t, err)
	keys, err := ParsePublicKeys(out)
	require.NoError(t, err)
	require.Equal(t, []ed25519.PublicKey{a, b}, keys)
	require.Empty(t, (*KeySet)(nil).JWKS().Keys)
	require.NotNil(t, (*KeySet)(nil).JWKS().Keys)
}

// FuzzParseKeys: the key parsers never panic, and every key they return
// is a full Ed25519 public key.
func FuzzParseKeys(f *testing.F) {
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := ParsePublicKeys(data)
		if err == nil {
			require.NotEmpty(t, keys)
			for _, k := range keys {
				require.Len(t, k, ed25519.PublicKeySize)
			}
		}
		if k, err := ParsePrivateKeyPEM(data); err == nil {
			_, err := NewSigner(k)
			require.NoError(t, err)
		}
	})
}

// check that the fuzz seed corpus is there (committed under testdata).
func TestFuzzParseKeysSeeds(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzParseKeys"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(entries), 4)
}
