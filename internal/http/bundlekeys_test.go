package http_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	hxhttp "hxd/internal/http"
	"hxd/internal/http/api"
	"hxd/internal/hxbundle"
	"hxd/internal/hxtest"
	"hxd/internal/journal"
)

func testSigner(t *testing.T, b byte) *hxbundle.Signer {
	t.Helper()
	s, err := hxbundle.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize)))
	require.NoError(t, err)
	return s
}

// signedBundle is metadataBundle signed by s.
func signedBundle(t *testing.T, s *hxbundle.Signer) []byte {
	t.Helper()
	rec := journal.Record{
		Version: 1, ID: "rec-1", Kind: journal.KindRunStarted, RecordedAt: "2025-01-02T03:04:05+00:00",
		SessionID: "s1", RunID: "r1", StepID: "0", AttemptID: "0", Payload: []byte(`{"x":1}`), Seq: 1,
	}
	a, err := hxbundle.Build(context.Background(), hxbundle.RunInfo{
		RunID: "r1", SessionID: "s1", Status: "completed", Phase: "result", SDKVersion: "test",
	}, recordSource{rec}, hxbundle.Policy{Signer: s}, t.TempDir())
	require.NoError(t, err)
	defer hxtest.Close(t, a)
	var b bytes.Buffer
	_, err = a.WriteTo(&b)
	require.NoError(t, err)
	return b.Bytes()
}

// TestBundleKeys: GET /.well-known/hxd-bundle-keys publishes the
// signer's key then the extra verify keys, each named by its thumbprint,
// without authentication and cacheable.
func TestBundleKeys(t *testing.T) {
	t.Parallel()
	signer, old := testSigner(t, 1), testSigner(t, 2)
	for _, tc := range []struct {
		name string
		cfg  func(*hxhttp.Config)
		want []*hxbundle.Signer
	}{
		{"no keys", func(*hxhttp.Config) {}, nil},
		{"signer", func(c *hxhttp.Config) { c.BundleSigner = signer }, []*hxbundle.Signer{signer}},
		{"signer and a rotated key", func(c *hxhttp.Config) {
			c.BundleSigner = signer
			c.BundleKeys = hxbundle.NewKeySet(old.PublicKey(), signer.PublicKey())
		}, []*hxbundle.Signer{signer, old}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, tc.cfg, func(c *hxhttp.Config) { c.Authenticator = rejectAll{} })
			resp, body := tb.do(t, request{method: "GET", path: "/.well-known/hxd-bundle-keys"})
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			require.Equal(t, "public, max-age=300", resp.Header.Get("Cache-Control"))
			got := decode[api.BundleKeySet](t, body)
			require.Len(t, got.Keys, len(tc.want))
			for i, s := range tc.want {
				k := got.Keys[i]
				require.Equal(t, s.Kid(), k.Kid)
				require.Equal(t, api.OKP, k.Kty)
				require.Equal(t, api.Ed25519, k.Crv)
				keys, err := hxbundle.ParsePublicKeys(body)
				require.NoError(t, err)
				require.Equal(t, s.PublicKey(), keys[i])
			}
		})
	}
}

// TestVerifyBundleSignature: /bundles/verify and /bundles/playback report
// the signature against the server's keys.
func TestVerifyBundleSignature(t *testing.T) {
	t.Parallel()
	signer, old, other := testSigner(t, 1), testSigner(t, 2), testSigner(t, 3)
	tb := setup(t, func(c *hxhttp.Config) {
		c.BundleSigner = signer
		c.BundleKeys = hxbundle.NewKeySet(old.PublicKey())
	})
	for _, tc := range []struct {
		name   string
		data   []byte
		status api.SignatureReportStatus
		kid    string
	}{
		{"signed by the signer", signedBundle(t, signer), api.SignatureValid, signer.Kid()},
		{"signed by a rotated key", signedBundle(t, old), api.SignatureValid, old.Kid()},
		{"signed by another key", signedBundle(t, other), api.SignatureUnknownKey, other.Kid()},
		{"unsigned", signedBundle(t, nil), api.SignatureAbsent, ""},
		{"manifest changed after signing", rezip(t, signedBundle(t, signer), func(name string, data []byte) []byte {
			if name != "manifest.json" {
				return data
			}
			return bytes.Replace(data, []byte(`"sdk_version":"test"`), []byte(`"sdk_version":"tesT"`), 1)
		}), api.SignatureInvalid, signer.Kid()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := &api.SignatureReport{Status: tc.status}
			if tc.kid != "" {
				want.Kid = &tc.kid
			}
			resp, body := tb.upload(t, upload{path: "/bundles/verify", data: tc.data})
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			got := decode[api.VerificationReport](t, body)
			require.True(t, got.Valid, string(body))
			require.Equal(t, want, got.Signature)
			resp, body = tb.upload(t, upload{path: "/bundles/playback", data: tc.data})
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			require.Equal(t, want, decode[api.PlaybackResult](t, body).Report.Signature)
		})
	}
	resp, body := tb.upload(t, upload{path: "/bundles/verify", data: []byte("not a zip")})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Nil(t, decode[api.VerificationReport](t, body).Signature, "an invalid bundle has no signature verdict")
}

// rejectAll refuses every token: only public operations answer.
type rejectAll struct{}

func (rejectAll) Authenticate(context.Context, string) (*hxhttp.Principal, error) {
	return nil, errors.New("no token is accepted")
}

// rezip rewrites a bundle with archive/zip after edit changed members.
func rezip(t *testing.T, data []byte, edit func(name string, data []byte) []byte) []byte {
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
		w, err := zw.Create(f.Name)
		require.NoError(t, err)
		_, err = w.Write(edit(f.Name, b))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return out.Bytes()
}
