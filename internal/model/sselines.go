package model

// sseLines watches the lines of an event stream as its body is read, to
// tell a stream that ended early (a cut: retryable) from a reply that is
// not an event stream at all (an HTML page or other text sent as
// text/event-stream: not retryable). It does not parse events — the SDKs
// do — it only notes whether some line is not an SSE field line: empty, a
// comment (":…"), or one of the fields data, event, id and retry, alone or
// followed by ':'. The SSE rules make the SDKs skip other lines, so
// foreign text never fails a stream that completes; it only decides the
// class of one that does not.
type sseLines struct {
	// foreign reports that some line was not an SSE field line.
	foreign bool
	// name holds the start of the current line, up to maxFieldName+1
	// bytes; decided reports that the current line was judged.
	name    []byte
	decided bool
}

// maxFieldName is the length of the longest SSE field name ("event",
// "retry").
const maxFieldName = 5

// write notes the bytes p of the body.
func (s *sseLines) write(p []byte) {
	if s.foreign {
		return
	}
	for _, c := range p {
		switch {
		case c == '\n' || c == '\r':
			if !s.decided && !sseField(s.name) {
				s.foreign = true
				return
			}
			s.name, s.decided = s.name[:0], false
		case s.decided:
		case c == ':':
			if !sseField(s.name) {
				s.foreign = true
				return
			}
			s.decided = true
		case len(s.name) >= maxFieldName:
			s.foreign = true
			return
		default:
			s.name = append(s.name, c)
		}
	}
}

// sseField reports whether name is empty (an empty line, a comment) or an
// SSE field name.
func sseField(name []byte) bool {
	switch string(name) {
	case "", "data", "event", "id", "retry":
		return true
	}
	return false
}
