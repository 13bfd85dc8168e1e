package hxbundle

// Report is the verdict on a bundle (REFERENCE §7.1) plus details.
type Report struct {
	// Valid is false when any check of REFERENCE §7.3 failed.
	Valid bool `json:"valid"`
	// Complete is true when valid and no completeness issue was found.
	Complete bool `json:"complete"`
	// RecordCount is the number of records of a valid bundle, else 0.
	RecordCount int `json:"record_count"`
	// Issues are the completeness codes (§7.4, in order) of a valid
	// bundle, or the single rejection message of an invalid one.
	Issues []string `json:"issues"`
	// Details say where each issue was found.
	Details []Detail `json:"details"`
	// Signature is the verdict on the manifest's signature, set only by
	// VerifyWithKeys on a valid bundle. It never changes Valid or
	// Complete.
	Signature *SignatureReport `json:"signature,omitempty"`
}

// Detail locates one issue: which member, record or attempt.
type Detail struct {
	// Issue is the issue code or rejection message it explains.
	Issue string `json:"issue"`
	// Member is the archive member concerned, if any.
	Member string `json:"member,omitempty"`
	// Seq is the 1-based record number concerned, if any.
	Seq int `json:"seq,omitempty"`
	// Kind is the record kind concerned, if any.
	Kind string `json:"kind,omitempty"`
	// ExecutionKey, StepID and AttemptID name the attempt concerned, if any.
	ExecutionKey string `json:"execution_key,omitempty"`
	StepID       string `json:"step_id,omitempty"`
	AttemptID    string `json:"attempt_id,omitempty"`
	// Message adds a short explanation (never payload content).
	Message string `json:"message,omitempty"`
}
