// Package journal owns the flight-recorder record: its 18 kinds, its
// fields, timestamps and number formatting. It imports nothing of hxd and
// only the standard library.
package journal
