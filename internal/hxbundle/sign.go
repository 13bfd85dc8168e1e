package hxbundle

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"slices"

	"hxd/internal/journal"
)

// Signatures (issue 23): the manifest's "hxd" object holds
// "signature": {"alg": "EdDSA", "kid": <RFC 7638 thumbprint>, "sig":
// <base64url, no padding>}, an Ed25519 signature over the canonical
// manifest bytes (REFERENCE §6.5) with that one member removed. The
// manifest lists every member's SHA-256, so the signature covers the
// whole bundle once Verify has checked the digests.

// SignatureAlg is the only signature algorithm: Ed25519 (RFC 8037).
const SignatureAlg = "EdDSA"

// ErrInvalidKey reports key material that is not an Ed25519 key in one of
// the accepted forms (PKCS#8 PEM private key; PKIX PEM public key; JWK or
// JWKS of kty OKP, crv Ed25519).
var ErrInvalidKey = errors.New("invalid bundle signing key")

// MaxKeyFileBytes bounds a key file or JWKS document that ParsePublicKeys
// and ParsePrivateKeyPEM accept.
const MaxKeyFileBytes = 1 << 20

// maxKeys bounds the keys of one JWKS or PEM file.
const maxKeys = 1000

// Signature statuses of SignatureReport.Status.
const (
	// SignatureValid: signed by a trusted key and unchanged since.
	SignatureValid = "valid"
	// SignatureInvalid: the signature does not match the manifest (the
	// bundle was changed after signing) or is malformed.
	SignatureInvalid = "invalid"
	// SignatureAbsent: the manifest carries no signature.
	SignatureAbsent = "absent"
	// SignatureUnknownKey: signed by a key that is not trusted.
	SignatureUnknownKey = "unknown_key"
)

// SignatureReport is the verdict on a bundle's signature. It is separate
// from Report.Valid and Report.Complete, which keep the reference's
// meaning (REFERENCE §7).
type SignatureReport struct {
	// Status is valid, invalid, absent or unknown_key.
	Status string `json:"status"`
	// Kid is the signature's key id, when the manifest names one.
	Kid string `json:"kid,omitempty"`
}

// exportSignature is the manifest's hxd.signature.
type exportSignature struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Sig string `json:"sig"`
}

// Thumbprint returns the RFC 7638 JWK thumbprint of pub: SHA-256 of
// {"crv":"Ed25519","kty":"OKP","x":<base64url(pub)>}, base64url without
// padding.
func Thumbprint(pub ed25519.PublicKey) string {
	doc := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(doc))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// Signer signs bundle manifests with one Ed25519 key. It is safe for
// concurrent use.
type Signer struct {
	key ed25519.PrivateKey
	kid string
}

// NewSigner returns a Signer for key (which must be a full
// ed25519.PrivateKeySize key).
func NewSigner(key ed25519.PrivateKey) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: private key of %d bytes", ErrInvalidKey, len(key))
	}
	pub, _ := key.Public().(ed25519.PublicKey)
	return &Signer{key: key, kid: Thumbprint(pub)}, nil
}

// Kid returns the signer's key id (its public key's RFC 7638 thumbprint).
func (s *Signer) Kid() string { return s.kid }

// PublicKey returns the signer's public key.
func (s *Signer) PublicKey() ed25519.PublicKey {
	pub, _ := s.key.Public().(ed25519.PublicKey)
	return pub
}

// sign returns the signature member for the canonical unsigned manifest.
func (s *Signer) sign(unsigned []byte) *exportSignature {
	return &exportSignature{
		Alg: SignatureAlg,
		Kid: s.kid,
		Sig: base64.RawURLEncoding.EncodeToString(ed25519.Sign(s.key, unsigned)),
	}
}

// KeySet is a set of trusted Ed25519 public keys by key id. The zero
// KeySet and a nil *KeySet are empty. It is not safe for concurrent
// modification; reading is.
type KeySet struct {
	byKid map[string]ed25519.PublicKey
	order []string
}

// NewKeySet returns a KeySet holding keys.
func NewKeySet(keys ...ed25519.PublicKey) *KeySet {
	s := &KeySet{}
	for _, k := range keys {
		s.Add(k)
	}
	return s
}

// Add trusts pub and returns its kid; adding a key twice keeps one copy.
func (s *KeySet) Add(pub ed25519.PublicKey) string {
	kid := Thumbprint(pub)
	if s.byKid == nil {
		s.byKid = map[string]ed25519.PublicKey{}
	}
	if _, ok := s.byKid[kid]; !ok {
		s.byKid[kid] = slices.Clone(pub)
		s.order = append(s.order, kid)
	}
	return kid
}

// Len returns the number of keys.
func (s *KeySet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.order)
}

// Key returns the key of kid.
func (s *KeySet) Key(kid string) (ed25519.PublicKey, bool) {
	if s == nil {
		return nil, false
	}
	k, ok := s.byKid[kid]
	return k, ok
}

// Keys returns the keys in the order they were added.
func (s *KeySet) Keys() []ed25519.PublicKey {
	if s == nil {
		return nil
	}
	out := make([]ed25519.PublicKey, 0, len(s.order))
	for _, kid := range s.order {
		out = append(out, s.byKid[kid])
	}
	return out
}

// JWK is one public key of a JWKS (RFC 7517, RFC 8037).
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid,omitempty"`
	Alg string `json:"alg,omitempty"`
	Use string `json:"use,omitempty"`
}

// JWKS is a JSON Web Key Set.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// JWKS returns the keys as a JWKS in the order they were added, each with
// its kid, alg EdDSA and use sig.
func (s *KeySet) JWKS() JWKS {
	out := JWKS{Keys: []JWK{}}
	if s == nil {
		return out
	}
	for _, kid := range s.order {
		out.Keys = append(out.Keys, JWK{
			Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(s.byKid[kid]),
			Kid: kid, Alg: SignatureAlg, Use: "sig",
		})
	}
	return out
}

// The DER of Ed25519 keys (RFC 8410), read and written with encoding/asn1:
// crypto/x509 would make the package depend on net (TestDepsOffline).

// oidEd25519 is id-Ed25519 (RFC 8410).
var oidEd25519 = asn1.ObjectIdentifier{1, 3, 101, 112}

// algorithmID is an AlgorithmIdentifier; Ed25519 has no parameters.
type algorithmID struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

// pkcs8Key is a PKCS#8 PrivateKeyInfo / OneAsymmetricKey (RFC 5958); its
// optional attributes and public key are not read.
type pkcs8Key struct {
	Version    int
	Algo       algorithmID
	PrivateKey []byte
}

// pkcs8Out is what GenerateKey writes: version 0, no parameters.
type pkcs8Out struct {
	Version int
	Algo    struct{ Algorithm asn1.ObjectIdentifier }
	Key     []byte
}

// pkixKey is a SubjectPublicKeyInfo.
type pkixKey struct {
	Algo      algorithmID
	PublicKey asn1.BitString
}

// GenerateKey returns a new Ed25519 private key as PKCS#8 PEM.
func GenerateKey() ([]byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	seed, err := asn1.Marshal(priv.Seed()) // CurvePrivateKey ::= OCTET STRING
	if err != nil {
		return nil, fmt.Errorf("encode signing key: %w", err)
	}
	out := pkcs8Out{Key: seed}
	out.Algo.Algorithm = oidEd25519
	der, err := asn1.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode signing key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// parsePKCS8 reads the Ed25519 key of a PKCS#8 DER.
func parsePKCS8(der []byte) (ed25519.PrivateKey, error) {
	var k pkcs8Key
	if rest, err := asn1.Unmarshal(der, &k); err != nil || len(rest) > 0 {
		return nil, fmt.Errorf("%w: not a PKCS#8 structure", ErrInvalidKey)
	}
	if !k.Algo.Algorithm.Equal(oidEd25519) || len(k.Algo.Parameters.FullBytes) > 0 {
		return nil, fmt.Errorf("%w: not an Ed25519 key", ErrInvalidKey)
	}
	var seed []byte
	if rest, err := asn1.Unmarshal(k.PrivateKey, &seed); err != nil || len(rest) > 0 || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: not an Ed25519 private key", ErrInvalidKey)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// parsePKIX reads the Ed25519 key of a SubjectPublicKeyInfo DER.
func parsePKIX(der []byte) (ed25519.PublicKey, error) {
	var k pkixKey
	if rest, err := asn1.Unmarshal(der, &k); err != nil || len(rest) > 0 {
		return nil, fmt.Errorf("%w: not a PKIX public key", ErrInvalidKey)
	}
	if !k.Algo.Algorithm.Equal(oidEd25519) || len(k.Algo.Parameters.FullBytes) > 0 {
		return nil, fmt.Errorf("%w: not an Ed25519 key", ErrInvalidKey)
	}
	if k.PublicKey.BitLength != 8*ed25519.PublicKeySize || len(k.PublicKey.Bytes) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: not an Ed25519 public key", ErrInvalidKey)
	}
	return ed25519.PublicKey(slices.Clone(k.PublicKey.Bytes)), nil
}

// ParsePrivateKeyPEM reads an Ed25519 private key from a PKCS#8 PEM block
// ("PRIVATE KEY"). Errors match ErrInvalidKey and never quote key bytes.
func ParsePrivateKeyPEM(data []byte) (ed25519.PrivateKey, error) {
	if len(data) > MaxKeyFileBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrInvalidKey, MaxKeyFileBytes)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: not a PKCS#8 PEM private key (PRIVATE KEY block)", ErrInvalidKey)
	}
	return parsePKCS8(block.Bytes)
}

// ParsePublicKeys reads Ed25519 public keys from data: one or more PEM
// blocks ("PUBLIC KEY", PKIX; a "PRIVATE KEY" block gives its public
// key), a JWKS ({"keys": [...]}) or a single JWK. A JWK's own "kid" is
// never trusted: callers derive it with Thumbprint. Keys of a JWKS whose
// kty or crv is not OKP/Ed25519 are skipped; no Ed25519 key at all is an
// error. Errors match ErrInvalidKey.
func ParsePublicKeys(data []byte) ([]ed25519.PublicKey, error) {
	if len(data) > MaxKeyFileBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrInvalidKey, MaxKeyFileBytes)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return parseJWKKeys(trimmed)
	}
	var keys []ed25519.PublicKey
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if len(keys) >= maxKeys {
			return nil, fmt.Errorf("%w: more than %d keys", ErrInvalidKey, maxKeys)
		}
		switch block.Type {
		case "PUBLIC KEY":
			pub, err := parsePKIX(block.Bytes)
			if err != nil {
				return nil, err
			}
			keys = append(keys, pub)
		case "PRIVATE KEY":
			priv, err := parsePKCS8(block.Bytes)
			if err != nil {
				return nil, err
			}
			pub, _ := priv.Public().(ed25519.PublicKey)
			keys = append(keys, pub)
		default:
			return nil, fmt.Errorf("%w: unexpected PEM block %q", ErrInvalidKey, block.Type)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no PEM public key, JWK or JWKS found", ErrInvalidKey)
	}
	return keys, nil
}

// parseJWKKeys reads a JWKS or a single JWK.
func parseJWKKeys(data []byte) ([]ed25519.PublicKey, error) {
	var doc struct {
		Keys *[]json.RawMessage `json:"keys"`
		Kty  string             `json:"kty"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: JSON: %w", ErrInvalidKey, err)
	}
	raws := []json.RawMessage{data}
	if doc.Keys != nil {
		raws = *doc.Keys
	}
	if len(raws) > maxKeys {
		return nil, fmt.Errorf("%w: more than %d keys", ErrInvalidKey, maxKeys)
	}
	var keys []ed25519.PublicKey
	for i, raw := range raws {
		var k JWK
		if err := json.Unmarshal(raw, &k); err != nil {
			return nil, fmt.Errorf("%w: key %d: %w", ErrInvalidKey, i, err)
		}
		if k.Kty != "OKP" || k.Crv != "Ed25519" {
			continue
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: key %d: x is not a base64url Ed25519 public key", ErrInvalidKey, i)
		}
		keys = append(keys, ed25519.PublicKey(x))
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no OKP/Ed25519 key in the JWK(S)", ErrInvalidKey)
	}
	return keys, nil
}

// CheckSignature checks the hxd.signature of manifest (the manifest.json
// text of a bundle that Verify found valid) against trusted: absent when
// there is none; invalid when it is malformed or does not match; else
// unknown_key when its kid is not trusted (a nil or empty KeySet trusts
// nothing); else valid.
func CheckSignature(manifest []byte, trusted *KeySet) SignatureReport {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(manifest, &top); err != nil {
		return SignatureReport{Status: SignatureInvalid}
	}
	var hxd map[string]json.RawMessage
	if raw, ok := top["hxd"]; !ok || json.Unmarshal(raw, &hxd) != nil || hxd == nil {
		return SignatureReport{Status: SignatureAbsent}
	}
	rawSig, ok := hxd["signature"]
	if !ok {
		return SignatureReport{Status: SignatureAbsent}
	}
	var sig exportSignature
	if err := json.Unmarshal(rawSig, &sig); err != nil {
		return SignatureReport{Status: SignatureInvalid}
	}
	rep := SignatureReport{Status: SignatureInvalid, Kid: sig.Kid}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(sig.Sig)
	if sig.Alg != SignatureAlg || sig.Kid == "" || err != nil || len(raw) != ed25519.SignatureSize {
		return rep
	}
	delete(hxd, "signature")
	unsigned, err := unsignedManifest(top, hxd)
	if err != nil {
		return rep
	}
	pub, ok := trusted.Key(sig.Kid)
	if !ok {
		rep.Status = SignatureUnknownKey
		return rep
	}
	if ed25519.Verify(pub, unsigned, raw) {
		rep.Status = SignatureValid
	}
	return rep
}

// unsignedManifest is the canonical manifest with hxd replaced by hxd
// (the signature removed).
func unsignedManifest(top, hxd map[string]json.RawMessage) ([]byte, error) {
	h, err := json.Marshal(hxd)
	if err != nil {
		return nil, err
	}
	top["hxd"] = h
	doc, err := json.Marshal(top)
	if err != nil {
		return nil, err
	}
	return journal.AppendCanonical(nil, doc)
}

// VerifyWithKeys is Verify plus the signature check: a valid bundle's
// Report.Signature says whether its manifest is signed by a key of
// trusted (nil trusts nothing: a signed bundle is then unknown_key).
// An invalid bundle's report has no Signature.
func VerifyWithKeys(r io.ReaderAt, size int64, limits Limits, trusted *KeySet) Report {
	res := verify(r, size, limits, false)
	rep := res.report
	if res.fail == nil && rep.Valid {
		s := CheckSignature(res.manifest, trusted)
		rep.Signature = &s
	}
	return rep
}
