// Package journal owns the flight-recorder record: its 18 kinds, its
// fields, timestamps and number formatting, and canonical JSON (the
// byte-exact encoding of Python's json.dumps with sorted keys, compact
// separators and raw UTF-8) with Python-style deep equality, on hxd's one
// JSON parser, which also reads bundles as the reference's json.loads
// does (Doc.ParsePython). It imports nothing of hxd and only the standard
// library.
package journal
