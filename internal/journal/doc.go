// Package journal owns the flight-recorder record: its 18 kinds, its
// fields, timestamps and number formatting, and canonical JSON (the
// byte-exact encoding of Python's json.dumps with sorted keys, compact
// separators and raw UTF-8) with Python-style deep equality. It imports
// nothing of hxd and only the standard library.
package journal
