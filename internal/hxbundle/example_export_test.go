package hxbundle_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"hxd/internal/hxbundle"
	"hxd/internal/journal"
)

// sliceSource serves records from memory and has no artifacts. A real
// source reads one consistent snapshot of the store.
type sliceSource []journal.Record

func (s sliceSource) Records(ctx context.Context, fn func(journal.Record) error) error {
	for _, r := range s {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (s sliceSource) OpenArtifact(ctx context.Context, sha256 string) (io.ReadCloser, error) {
	return nil, errors.New("no artifacts")
}

// Example_build exports a run with payloads, auto-redaction and one
// declarative rule, then streams the archive (here into memory; an HTTP
// handler would set Content-Length to Size and write to the response).
func Example_build() {
	src := sliceSource{
		{Version: 1, ID: "r1", Kind: journal.KindRunStarted, RecordedAt: "2025-01-02T03:04:05+00:00",
			SessionID: "s1", RunID: "run1", StepID: "0", AttemptID: "0",
			Payload: json.RawMessage(`{"message": "Check account 4111111111111111", "config": {"api_key": "sk-live"}}`), Seq: 1},
	}
	info := hxbundle.RunInfo{
		RunID: "run1", SessionID: "s1", Status: "completed", Phase: "result",
		Agent:      &hxbundle.AgentRef{Name: "invoice-analyst", Version: "v1"},
		SDKVersion: "hxd-dev", ExportedAt: time.Date(2025, 1, 2, 3, 4, 6, 0, time.UTC),
	}
	policy := hxbundle.Policy{
		IncludePayloads: true,
		Redact:          []hxbundle.Rule{{Pattern: `\d{16}`, Replace: "[card]"}},
	}

	a, err := hxbundle.Build(context.Background(), info, src, policy, os.TempDir())
	if err != nil {
		log.Fatal(err) // errors.Is(err, hxbundle.ErrLimitExceeded) → 422 before any byte is sent
	}
	defer func() {
		// Close removes the spool file; a failure leaves it behind.
		if err := a.Close(); err != nil {
			log.Print(err)
		}
	}()

	var out bytes.Buffer
	n, err := a.WriteTo(&out)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("size known in advance:", n == a.Size())

	zr, err := zip.NewReader(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range zr.File {
		fmt.Println(f.Name)
		if f.Name == "records.jsonl" {
			rc, err := f.Open()
			if err != nil {
				log.Fatal(err)
			}
			line, err := io.ReadAll(rc)
			if err := errors.Join(err, rc.Close()); err != nil {
				log.Fatal(err)
			}
			fmt.Print(string(line))
		}
	}
	// Output:
	// size known in advance: true
	// records.jsonl
	// {"attempt_id":"0","capture":"redacted","execution_key":null,"id":"r1","kind":"run.started","payload":{"config":{"api_key":"[REDACTED]"},"message":"Check account [card]"},"recorded_at":"2025-01-02T03:04:05+00:00","run_id":"run1","seq":1,"session_id":"s1","step_id":"0","version":1}
	// manifest.json
}
