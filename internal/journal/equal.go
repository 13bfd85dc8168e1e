package journal

import (
	"bytes"
	"math"
	"math/big"
	"strconv"
)

// Equal reports whether the JSON texts a and b hold equal values, where
// equality is Python's == on the values json.loads returns. The bundle
// exporter uses it to decide capture "present" (REFERENCE §5.4 step 4,
// §12.8):
//
//   - objects are equal when they have the same keys (compared after
//     decoding escapes) and equal values under each key; member order
//     does not matter;
//   - arrays are equal when they have the same length and equal elements
//     in the same order;
//   - strings are equal when they hold the same code points after
//     decoding escapes ("\u00e9" equals "é");
//   - null equals only null;
//   - numbers are equal when their exact values are, across integer and
//     float literals: 1 == 1.0 == 1E0, 0 == -0 == -0.0, 100 == 1e2. A float
//     literal is first rounded to float64 (so 0.1 == 0.1000000000000000001),
//     an integer literal never is (so 9007199254740993 != 9007199254740992.0,
//     as in Python). Float literals that overflow (1e999) read as the
//     infinity of their sign, as in Python, and equal only that infinity;
//   - booleans are numbers, because Python's bool is an int subclass:
//     true == 1 == 1.0 and false == 0 == 0.0 == -0.0, also inside
//     containers ([true] == [1], {"a": false} == {"a": 0}). true never
//     equals "true", and null never equals false or 0.
//
// Equal accepts what Python's json.loads accepts and AppendCanonical
// refuses: lone surrogate escapes (compared as code points) and
// overflowing float literals. It fails like AppendCanonical otherwise,
// including ErrDuplicateKey where Python would keep the last value.
func Equal(a, b []byte) (bool, error) {
	pa := getParser()
	defer putParser(pa)
	if err := pa.parse(a, modeEqual, MaxDepth); err != nil {
		return false, err
	}
	pb := getParser()
	defer putParser(pb)
	if err := pb.parse(b, modeEqual, MaxDepth); err != nil {
		return false, err
	}
	return equalNodes(pa, 0, pb, 0), nil
}

// EqualValues reports whether two parsed values are equal under Python's
// == (see Equal), also when they come from different Docs or the same.
// An absent Value equals only another absent one.
func EqualValues(a, b Value) bool {
	if a.p == nil || b.p == nil {
		return a.p == nil && b.p == nil
	}
	return equalNodes(a.p, a.i, b.p, b.i)
}

// equalNodes compares node i of pa with node j of pb (pa may be pb).
// Strings of pa decode into pa.scratchA, those of pb into pb.scratchB.
// Recursion depth is bounded by the parsers' depth limit.
func equalNodes(pa *parser, i int32, pb *parser, j int32) bool {
	na, nb := &pa.nodes[i], &pb.nodes[j]
	if isNumeric(na.kind) && isNumeric(nb.kind) {
		return equalNumbers(pa, na, pb, nb)
	}
	if na.kind != nb.kind {
		return false
	}
	switch na.kind {
	case jNull:
		return true
	case jString:
		if (na.flags|nb.flags)&fEsc == 0 {
			return bytes.Equal(pa.src[na.start:na.end], pb.src[nb.start:nb.end])
		}
		return bytes.Equal(pa.keyBytes(i, &pa.scratchA), pb.keyBytes(j, &pb.scratchB))
	case jArray:
		x, y := i+1, j+1
		for x < na.next && y < nb.next {
			if !equalNodes(pa, x, pb, y) {
				return false
			}
			x, y = pa.nodes[x].next, pb.nodes[y].next
		}
		return x == na.next && y == nb.next
	default: // jObject
		// Both member lists come in key order and free of duplicates:
		// the objects are equal when the keys and the values under them
		// are, position by position.
		ia, ib := pa.memberIter(i), pb.memberIter(j)
		for {
			ka, okA := ia.next()
			kb, okB := ib.next()
			if okA != okB {
				return false
			}
			if !okA {
				return true
			}
			if !equalNodes(pa, ka, pb, kb) || !equalNodes(pa, ka+1, pb, kb+1) {
				return false
			}
		}
	}
}

func isNumeric(k jkind) bool { return k == jTrue || k == jFalse || k == jInt || k == jFloat }

// intLiteral returns the decimal digits of an integer-valued node (int or
// bool) normalized so that equal values have equal bytes: no "-0".
func intLiteral(p *parser, n *jnode) []byte {
	switch n.kind {
	case jTrue:
		return []byte("1")
	case jFalse:
		return []byte("0")
	}
	lit := p.src[n.start:n.end]
	if len(lit) == 2 && lit[0] == '-' && lit[1] == '0' {
		return lit[1:]
	}
	return lit
}

func equalNumbers(pa *parser, na *jnode, pb *parser, nb *jnode) bool {
	switch {
	case na.kind == jFloat && nb.kind == jFloat:
		return parseFloat(pa.src[na.start:na.end]) == parseFloat(pb.src[nb.start:nb.end])
	case na.kind == jFloat:
		return intEqualsFloat(intLiteral(pb, nb), parseFloat(pa.src[na.start:na.end]))
	case nb.kind == jFloat:
		return intEqualsFloat(intLiteral(pa, na), parseFloat(pb.src[nb.start:nb.end]))
	default:
		// JSON integer literals have no leading zeros, so after removing
		// "-0" equal values have equal literals.
		return bytes.Equal(intLiteral(pa, na), intLiteral(pb, nb))
	}
}

// intEqualsFloat compares the integer literal lit with f exactly, like
// Python's int == float.
func intEqualsFloat(lit []byte, f float64) bool {
	if math.IsInf(f, 0) || f != math.Trunc(f) {
		return false
	}
	digits := len(lit)
	if lit[0] == '-' {
		digits--
	}
	// |f| < 2^1024 < 10^309: a longer integer cannot be equal.
	if digits > 309 {
		return false
	}
	if digits <= 15 { // |n| < 2^53: float64(n) is exact.
		n, err := strconv.ParseInt(string(lit), 10, 64)
		return err == nil && float64(n) == f
	}
	var n big.Int
	if _, ok := n.SetString(string(lit), 10); !ok {
		return false
	}
	fi, _ := big.NewFloat(f).Int(nil)
	return n.Cmp(fi) == 0
}
