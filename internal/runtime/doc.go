// Package runtime is hxd's durable state machine: sessions, runs, steps,
// attempts, recovery, approvals and resolutions.
//
// The loop is data: NextCommand, NextPhase, NextStatus and NextToolStatus
// are pure tables; commands that do I/O ask them for every change. Every
// boundary reaches storage through one helper (committer.commit) that
// writes the new run state, public events, journal records and a
// checkpoint record in one transaction; model.started and tool.dispatched
// commit before the provider call or tool handler, and tool.returned (the
// raw result) before result middleware runs (REFERENCE §4.2).
//
// Sessions belong to the principal that created them, and session ids are
// per principal: a session is stored and locked under SessionKey(owner,
// id), and everything shown outside (results, events, journal records,
// webhook and checkpoint bodies, exports) carries SessionIDOf(key), the id
// the caller knows (sessionkey.go).
//
// runtime consumes the Store interface declared in runtime/rtstore and
// imports journal, agent, model and tool. It must never import net/http
// servers, chi, internal/http, a store implementation or a database driver.
package runtime
