package hxbundle_test

import (
	"errors"
	"fmt"
	"os"

	"hxd/internal/hxbundle"
)

func ExampleVerify() {
	f, err := os.Open("testdata/valid-metadata-only.hx")
	if err != nil {
		panic(err)
	}
	st, err := f.Stat()
	if err != nil {
		panic(err)
	}
	r := hxbundle.Verify(f, st.Size(), hxbundle.DefaultLimits)
	if err := f.Close(); err != nil {
		panic(err)
	}
	fmt.Println(r.Valid, r.Complete, r.RecordCount, r.Issues)
	// Output: true false 21 [payloads_omitted_or_redacted]
}

func ExamplePlayback() {
	f, err := os.Open("testdata/valid-complete.hx")
	if err != nil {
		panic(err)
	}
	st, err := f.Stat()
	if err != nil {
		panic(err)
	}
	// Playback keeps the records and artifacts it returns: f may be closed.
	p, err := hxbundle.Playback(f, st.Size(), hxbundle.DefaultLimits)
	if err := errors.Join(err, f.Close()); err != nil {
		panic(err)
	}
	fmt.Println(len(p.Records), p.Report.Complete)
	for _, a := range p.Artifacts {
		data, _ := p.Artifact(a.SHA256)
		fmt.Println(a.SHA256[:12], a.Size, len(data))
	}
	// Output:
	// 21 true
	// cdf07145156a 74 74
}

func ExamplePlayback_invalid() {
	f, err := os.Open("testdata/tampered-edited-payload.hx")
	if err != nil {
		panic(err)
	}
	st, err := f.Stat()
	if err != nil {
		panic(err)
	}
	_, err = hxbundle.Playback(f, st.Size(), hxbundle.DefaultLimits)
	if err := f.Close(); err != nil {
		panic(err)
	}
	var invalid *hxbundle.InvalidError
	fmt.Println(errors.Is(err, hxbundle.ErrInvalidBundle), errors.As(err, &invalid))
	fmt.Println(invalid.Message, invalid.Detail.Member)
	// Output:
	// true true
	// Member checksum mismatch records.jsonl
}
