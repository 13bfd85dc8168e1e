package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"hxd/internal/http/api"
	"hxd/internal/hxbundle"
)

// Bundle uploads (POST /bundles/verify and /bundles/playback) are not
// bounded by Config.MaxBodyBytes nor read by the request validator: their
// handlers spool the body to a private temporary file, at most
// Limits.MaxBytes of it, and verify the file. An upload above the limit is
// the reference's first check ("Incident exceeds byte limit"), answered as
// an invalid bundle rather than a 413.

// bundleUploadOperations are the operations whose body is a bundle.
var bundleUploadOperations = map[string]bool{"verifyBundle": true, "playbackBundle": true}

// bundleMediaTypes are the media types a bundle upload may declare (the
// contract's first); a body without a Content-Type is taken too.
var bundleMediaTypes = []string{"application/vnd.harnessx.incident+zip", "application/zip", "application/octet-stream"}

// bundleUpload reports whether r uploads a bundle. It runs before routing
// (limitBody), so it matches the contract's paths.
func bundleUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && (r.URL.Path == "/bundles/verify" || r.URL.Path == "/bundles/playback")
}

// VerifyBundle verifies an uploaded archive. Whatever the upload holds the
// answer is a 200 report; only a server-side failure (no spool space) is
// a 5xx.
func (s *Server) VerifyBundle(ctx context.Context, req api.VerifyBundleRequestObject) (api.VerifyBundleResponseObject, error) {
	up, err := s.spoolUpload(ctx, req.Body)
	if err != nil {
		return nil, err
	}
	defer up.close()
	if up.tooLarge {
		return api.VerifyBundle200JSONResponse(reportOut(byteLimitReport())), nil
	}
	release, err := s.bundleJob(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	// The span covers the verification itself, not the upload or the
	// wait for a slot.
	_, span := s.spanTracer().Start(ctx, "hxd.verify", trace.WithAttributes(attribute.Int64("hxd.bundle.bytes", up.size)))
	rep := hxbundle.VerifyWithKeys(up.f, up.size, s.limits, s.bundleKeys)
	span.SetAttributes(attribute.Bool("hxd.bundle.valid", rep.Valid), attribute.Bool("hxd.bundle.complete", rep.Complete))
	span.End()
	return api.VerifyBundle200JSONResponse(reportOut(rep)), nil
}

// bundleJob waits for one of the Config.MaxBundleJobs slots (an upload is
// spooled first, so a slow upload holds none) and returns its release;
// it returns ctx's error if ctx ends first.
func (s *Server) bundleJob(ctx context.Context) (release func(), err error) {
	select {
	case s.bundleJobs <- struct{}{}:
		return func() { <-s.bundleJobs }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for a bundle slot: %w", ctx.Err())
	}
}

// PlaybackBundle plays an uploaded archive back: manifest, records,
// report and included artifacts; an invalid one is 422 invalid_bundle
// with the verifier's message.
func (s *Server) PlaybackBundle(ctx context.Context, req api.PlaybackBundleRequestObject) (api.PlaybackBundleResponseObject, error) {
	up, err := s.spoolUpload(ctx, req.Body)
	if err != nil {
		return nil, err
	}
	defer up.close()
	if up.tooLarge {
		return nil, &hxbundle.InvalidError{Message: hxbundle.MsgByteLimit}
	}
	release, err := s.bundleJob(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	played, err := hxbundle.Playback(up.f, up.size, s.limits)
	if err != nil {
		return nil, err
	}
	sig := hxbundle.CheckSignature(played.Manifest, s.bundleKeys)
	played.Report.Signature = &sig
	out := api.PlaybackResult{
		Manifest:  played.Manifest,
		Records:   played.Records,
		Report:    reportOut(played.Report),
		Artifacts: make([]api.ArtifactInfo, 0, len(played.Artifacts)),
	}
	if out.Records == nil {
		out.Records = []json.RawMessage{}
	}
	for _, a := range played.Artifacts {
		out.Artifacts = append(out.Artifacts, api.ArtifactInfo{Sha256: a.SHA256, Size: a.Size})
	}
	return api.PlaybackBundle200JSONResponse(out), nil
}

// upload is a spooled request body.
type upload struct {
	f        *os.File // nil when tooLarge
	size     int64
	tooLarge bool
}

// close removes the spool file.
func (u *upload) close() {
	if u.f != nil {
		_ = u.f.Close()
		_ = os.Remove(u.f.Name())
	}
}

// spoolUpload copies body into a private temporary file (mode 0600), at
// most s.limits.MaxBytes bytes of it: a longer body (declared or read) is
// tooLarge, and is not read further: the answer closes the connection
// (the server would otherwise wait for, and discard, the rest before it
// answers).
func (s *Server) spoolUpload(ctx context.Context, body io.Reader) (*upload, error) {
	if r, ok := httpRequestFrom(ctx); ok && r.ContentLength > s.limits.MaxBytes {
		return tooLargeUpload(ctx), nil
	}
	if body == nil {
		body = http.NoBody
	}
	f, err := os.CreateTemp(s.spoolDir, "hxd-upload-*.hx")
	if err != nil {
		return nil, fmt.Errorf("spool bundle upload: %w", err)
	}
	up := &upload{f: f}
	n, err := io.Copy(f, io.LimitReader(body, s.limits.MaxBytes+1))
	if err != nil {
		up.close()
		var tooLarge *http.MaxBytesError
		if errors.Is(err, context.Canceled) || errors.As(err, &tooLarge) || errors.Is(err, errBodyTimeout) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &requestError{Detail: "the request body could not be read", Err: err}
	}
	if n > s.limits.MaxBytes {
		up.close()
		return tooLargeUpload(ctx), nil
	}
	up.size = n
	return up, nil
}

// tooLargeUpload is the upload over the byte limit; its answer closes the
// connection, so that the unread rest of the body is neither awaited nor
// read.
func tooLargeUpload(ctx context.Context) *upload {
	if w, ok := responseWriterFrom(ctx); ok {
		w.Header().Set("Connection", "close")
	}
	return &upload{tooLarge: true}
}

// byteLimitReport is the verdict on an upload above the byte limit (the
// reference's check 1 on the file size).
func byteLimitReport() hxbundle.Report {
	return hxbundle.Report{
		Issues:  []string{hxbundle.MsgByteLimit},
		Details: []hxbundle.Detail{{Issue: hxbundle.MsgByteLimit, Message: "the upload is larger than the server's byte limit"}},
	}
}

// reportOut is a Report as the contract's VerificationReport (issues and
// details are arrays, never null).
func reportOut(r hxbundle.Report) api.VerificationReport {
	out := api.VerificationReport{
		Valid:       r.Valid,
		Complete:    r.Complete,
		RecordCount: r.RecordCount,
		Issues:      r.Issues,
		Details:     make([]api.VerificationDetail, 0, len(r.Details)),
	}
	if out.Issues == nil {
		out.Issues = []string{}
	}
	for _, d := range r.Details {
		out.Details = append(out.Details, api.VerificationDetail{
			Issue:        d.Issue,
			Member:       optString(d.Member),
			Seq:          optInt(d.Seq),
			Kind:         optString(d.Kind),
			ExecutionKey: optString(d.ExecutionKey),
			StepId:       optString(d.StepID),
			AttemptId:    optString(d.AttemptID),
			Message:      optString(d.Message),
		})
	}
	if r.Signature != nil {
		out.Signature = &api.SignatureReport{
			Status: api.SignatureReportStatus(r.Signature.Status),
			Kid:    optString(r.Signature.Kid),
		}
	}
	return out
}

// bundleKeysCacheControl is how long clients may cache the bundle keys.
const bundleKeysCacheControl = "public, max-age=300"

// GetBundleKeys serves the public keys that verify this server's bundle
// signatures as a JWKS (Config.BundleKeys), without authentication.
func (s *Server) GetBundleKeys(context.Context, api.GetBundleKeysRequestObject) (api.GetBundleKeysResponseObject, error) {
	jwks := s.bundleKeys.JWKS()
	out := api.BundleKeySet{Keys: make([]api.BundleKey, 0, len(jwks.Keys))}
	for _, k := range jwks.Keys {
		alg, use := api.EdDSA, api.Sig
		out.Keys = append(out.Keys, api.BundleKey{
			Kty: api.BundleKeyKty(k.Kty), Crv: api.BundleKeyCrv(k.Crv), X: k.X, Kid: k.Kid, Alg: &alg, Use: &use,
		})
	}
	cc := bundleKeysCacheControl
	return api.GetBundleKeys200JSONResponse{Body: out, Headers: api.GetBundleKeys200ResponseHeaders{CacheControl: &cc}}, nil
}

func optInt(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}
