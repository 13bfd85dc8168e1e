package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Session ids are scoped per principal. The id a caller knows (its own
// choice, or the UUIDv7 the server made) is what every answer, event,
// journal record, bundle, webhook body and checkpoint shows; inside, a
// session is stored, locked and (on the Temporal engine) run as a
// workflow under its key, SessionKey(owner, id). Keys of different
// principals never collide, whatever ids they choose, and a caller can
// only ever name keys of its own principal: one principal's ids neither
// collide with nor reveal another's, while a principal that re-uses an
// id of its own meets its own session (session_exists).

// sessionKeySep ends the principal's part of a session key. Caller-chosen
// ids cannot hold it (the contract's pattern), nor can the hex part.
const sessionKeySep = "/"

// SessionKey is the key of the session a principal calls id:
// "<32 lowercase hex digits of SHA-256(principal)>/<id>".
func SessionKey(principal, id string) string {
	sum := sha256.Sum256([]byte(principal))
	return hex.EncodeToString(sum[:16]) + sessionKeySep + id
}

// SessionIDOf is the session id the caller knows of a session key: what
// follows the principal's part (a string that is no key is returned as
// it is).
func SessionIDOf(key string) string {
	if _, id, ok := strings.Cut(key, sessionKeySep); ok {
		return id
	}
	return key
}
