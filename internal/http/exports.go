package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"hxd/internal/http/api"
	"hxd/internal/hxbundle"
	"hxd/internal/journal"
	hxruntime "hxd/internal/runtime"
)

// ErrSelfVerification is an export whose archive the verifier rejects: a
// writer bug, never the client's fault (500 internal over HTTP).
var ErrSelfVerification = errors.New("exported bundle failed self-verification")

// ExportFunc reads a consistent cut of one run and hands it to fn (the
// Incident is valid only inside fn): Service.Export or
// runtime.ExportOffline bound to a run.
type ExportFunc func(fn func(*hxruntime.Incident) error) error

// BundleOptions configure ExportBundle.
type BundleOptions struct {
	// Policy says what the bundle may contain and bounds it.
	Policy hxbundle.Policy
	// Version is the writer's version, the manifest's sdk_version.
	Version string
	// Dir holds the archive's spool file. Optional, default: os.TempDir().
	Dir string
	// ProgressFunc, when set, is called with the number of records read
	// so far, every progressEvery records. Optional.
	ProgressFunc func(records int)
}

// progressEvery is how often ExportBundle reports progress, in records.
const progressEvery = 10000

// ExportBundle builds the bundle of the run export reads, inside its
// callback (the consistent cut), then verifies the archive with the
// policy's limits. Nothing has been sent or published yet: the caller
// streams or publishes the archive and must Close it. Errors: those of
// export (runtime.ErrNotFound, runtime.ErrRecordingDisabled), of
// hxbundle.Build (hxbundle.ErrInvalidPolicy, hxbundle.ErrLimitExceeded)
// and ErrSelfVerification; no archive is returned with an error.
func ExportBundle(ctx context.Context, export ExportFunc, o BundleOptions) (*hxbundle.Archive, hxbundle.Report, error) {
	var archive *hxbundle.Archive
	err := export(func(inc *hxruntime.Incident) error {
		src := &incidentSource{inc: inc, progress: o.ProgressFunc}
		a, err := hxbundle.Build(ctx, runInfo(inc, o.Version), src, o.Policy, o.Dir)
		archive = a
		return err
	})
	if err != nil {
		if archive != nil {
			_ = archive.Close()
		}
		return nil, hxbundle.Report{}, err
	}
	rep := hxbundle.Verify(archive.ReaderAt(), archive.Size(), o.Policy.EffectiveLimits())
	if !rep.Valid {
		_ = archive.Close()
		return nil, rep, fmt.Errorf("%w: %s", ErrSelfVerification, strings.Join(rep.Issues, "; "))
	}
	return archive, rep, nil
}

// runInfo is the manifest's view of an incident.
func runInfo(inc *hxruntime.Incident, version string) hxbundle.RunInfo {
	info := hxbundle.RunInfo{
		RunID:      inc.RunID,
		SessionID:  inc.SessionID,
		Status:     string(inc.Status),
		Phase:      string(inc.Phase),
		SDKVersion: version,
		ExportedAt: time.Now(),
	}
	if inc.Agent.Name != "" || inc.Agent.Version != "" {
		info.Agent = &hxbundle.AgentRef{Name: inc.Agent.Name, Version: inc.Agent.Version}
	}
	for _, u := range inc.Unresolved {
		info.Unresolved = append(info.Unresolved, hxbundle.UnresolvedOperation{
			ExecutionKey: u.ExecutionKey, Status: string(u.Status), Attempt: u.Attempt,
		})
	}
	return info
}

// An Incident is a bundle source; incidentSource only counts its records.
var _ hxbundle.Source = (*hxruntime.Incident)(nil)

// incidentSource is an Incident as a bundle source, counting records.
type incidentSource struct {
	inc      *hxruntime.Incident
	progress func(int)
	n        int
}

// Records implements hxbundle.Source.
func (s *incidentSource) Records(ctx context.Context, fn func(journal.Record) error) error {
	return s.inc.Records(ctx, func(r journal.Record) error {
		s.n++
		if s.progress != nil && s.n%progressEvery == 0 {
			s.progress(s.n)
		}
		return fn(r)
	})
}

// OpenArtifact implements hxbundle.Source.
func (s *incidentSource) OpenArtifact(ctx context.Context, sha256 string) (io.ReadCloser, error) {
	return s.inc.OpenArtifact(ctx, sha256)
}

// ExportRun exports a recorded run of the caller as a .hx archive. Every
// check (ownership, recording, policy, limits, self-verification) happens
// before the first byte is sent; the archive then streams from its spool
// file, which is removed when the response ends, however it ends.
func (s *Server) ExportRun(ctx context.Context, req api.ExportRunRequestObject) (api.ExportRunResponseObject, error) {
	p, err := s.exportPolicy(req.Body)
	audit := []any{
		"request_id", requestIDFrom(ctx),
		"principal", hxruntime.PrincipalFrom(ctx),
		"operation", "exportRun",
		"run_id", req.RunId,
		"include_payloads", p.IncludePayloads,
		"include_artifacts", p.IncludeArtifacts,
		"redact_rules", len(p.Redact),
	}
	var archive *hxbundle.Archive
	var rep hxbundle.Report
	if err == nil {
		p.Signer = s.bundleSigner
		archive, rep, err = ExportBundle(ctx, func(fn func(*hxruntime.Incident) error) error {
			return s.svc.Export(ctx, req.RunId, fn)
		}, BundleOptions{Policy: p, Version: s.version, Dir: s.spoolDir})
	}
	if err != nil {
		s.log.InfoContext(ctx, "run export failed", append(audit, "outcome", "failed")...)
		return nil, err
	}
	// The archive outlives this call; it goes when the request ends even
	// if the response is never visited.
	context.AfterFunc(ctx, func() { _ = archive.Close() })
	s.log.InfoContext(ctx, "run exported", append(audit,
		"outcome", "exported", "size", archive.Size(), "records", rep.RecordCount, "complete", rep.Complete)...)
	st := &exportStream{s: s, runID: req.RunId, archive: archive}
	return exportStreamResponse(func(w http.ResponseWriter) error { return st.visit(ctx, w) }), nil
}

// exportPolicy turns the request body into a policy. Limits default to the
// server's and may only tighten them; semantic problems (include_artifacts
// without include_payloads, a bad rule or limit) are invalid_policy.
func (s *Server) exportPolicy(body *api.ExportPolicy) (hxbundle.Policy, error) {
	p := hxbundle.Policy{Limits: s.limits}
	if body == nil {
		return p, nil
	}
	p.IncludePayloads = deref(body.IncludePayloads)
	p.IncludeArtifacts = deref(body.IncludeArtifacts)
	if body.Redact != nil {
		for i, raw := range *body.Redact {
			var r hxbundle.Rule
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&r); err != nil {
				return p, &requestError{Detail: fmt.Sprintf("request body field /redact/%d is not a redaction rule", i), Err: err}
			}
			p.Redact = append(p.Redact, r)
		}
	}
	var problems []string
	if l := body.Limits; l != nil {
		tighten := func(name string, v *int64, ceiling int64, dst *int64) {
			switch {
			case v == nil:
			case *v <= 0:
				problems = append(problems, hxbundle.ErrInvalidLimits.Error())
			case *v > ceiling:
				problems = append(problems, fmt.Sprintf("limits.%s must not exceed the server's %d", name, ceiling))
			default:
				*dst = *v
			}
		}
		maxRecords, maxMembers := int64(p.Limits.MaxRecords), int64(p.Limits.MaxMembers)
		tighten("max_bytes", l.MaxBytes, s.limits.MaxBytes, &p.Limits.MaxBytes)
		tighten("max_member_bytes", l.MaxMemberBytes, s.limits.MaxMemberBytes, &p.Limits.MaxMemberBytes)
		tighten("max_records", intPtr64(l.MaxRecords), int64(s.limits.MaxRecords), &maxRecords)
		tighten("max_members", intPtr64(l.MaxMembers), int64(s.limits.MaxMembers), &maxMembers)
		p.Limits.MaxRecords, p.Limits.MaxMembers = int(maxRecords), int(maxMembers)
	}
	if err := p.Validate(); err != nil {
		problems = append(problems, policyMessages(err)...)
	}
	if len(problems) > 0 {
		return p, policyError(dedupe(problems))
	}
	return p, nil
}

// policyError is an invalid_policy problem whose detail lists msgs.
func policyError(msgs []string) error {
	return &hxruntime.PublicError{Err: hxbundle.ErrInvalidPolicy, Detail: strings.Join(msgs, "; ")}
}

// policyMessages are the client-safe messages of a Policy.Validate error:
// one per joined error, without the sentinel's prefix.
func policyMessages(err error) []string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok { //nolint:errorlint // splitting errors.Join
		errs = j.Unwrap()
	}
	prefix := hxbundle.ErrInvalidPolicy.Error() + ": "
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, strings.TrimPrefix(e.Error(), prefix))
	}
	return dedupe(msgs)
}

func dedupe(in []string) []string {
	out := in[:0]
	seen := map[string]bool{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func intPtr64(p *int) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

// exportStreamResponse is the 200 answer of exportRun. The strict
// server's Visit methods receive no context, so the handler returns a
// closure over its ctx, which the generated code calls before the request
// ends.
type exportStreamResponse func(w http.ResponseWriter) error

// VisitExportRunResponse implements api.ExportRunResponseObject.
func (f exportStreamResponse) VisitExportRunResponse(w http.ResponseWriter) error { return f(w) }

// exportStream is the archive of an exportRun answer, streamed from its
// spool file with its exact Content-Length and flushed as it goes (the
// generated stream response copies without flushing).
type exportStream struct {
	s       *Server
	runID   string
	archive *hxbundle.Archive
}

// visit writes the archive for the request of ctx. Once the headers are
// out a failure (usually the client going away) can only end the response
// early; it is logged, and the spool file is removed either way.
func (e *exportStream) visit(ctx context.Context, w http.ResponseWriter) error {
	defer func() {
		if err := e.archive.Close(); err != nil {
			e.s.log.WarnContext(ctx, "remove export spool", "request_id", requestIDFrom(ctx), "run_id", e.runID, "error", err)
		}
	}()
	h := w.Header()
	h.Set("Content-Type", "application/vnd.harnessx.incident+zip")
	h.Set("Content-Disposition", attachment(e.runID+".hx"))
	h.Set("Content-Length", strconv.FormatInt(e.archive.Size(), 10))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	fw := &flushWriter{w: w, rc: http.NewResponseController(w)}
	_, err := e.archive.WriteTo(fw)
	if err == nil {
		err = fw.rc.Flush()
	}
	if err != nil && ctx.Err() == nil {
		e.s.log.WarnContext(ctx, "export stream ended early",
			"request_id", requestIDFrom(ctx), "run_id", e.runID, "error", err)
	}
	return nil
}

// flushWriter flushes after every write.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, f.rc.Flush()
}

// attachment is a Content-Disposition naming the file: the quoted form
// `attachment; filename="<name>"` for plain names, RFC 2231 otherwise.
func attachment(name string) string {
	if name == "" {
		return "attachment"
	}
	plain := true
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("-_.:@~+=", c) >= 0
		plain = plain && ok
	}
	if plain {
		return `attachment; filename="` + name + `"`
	}
	if v := mime.FormatMediaType("attachment", map[string]string{"filename": name}); v != "" {
		return v
	}
	return "attachment"
}
