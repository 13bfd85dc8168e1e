package hxbundle

import (
	"bytes"
	"encoding/hex"
	"fmt"

	"hxd/internal/journal"
)

// Format identifiers of the bundle (REFERENCE §6.3).
const (
	// FormatName is the manifest's "format".
	FormatName = "harness-x.incident"
	// FormatVersion is the manifest's "version".
	FormatVersion = 1
)

// exportManifest is manifest.json: the reference's 15 keys plus "hxd".
type exportManifest struct {
	Format               string                              `json:"format"`
	Version              int                                 `json:"version"`
	CreatedAt            string                              `json:"created_at"`
	RunID                string                              `json:"run_id"`
	SessionID            string                              `json:"session_id"`
	Status               string                              `json:"status"`
	Phase                string                              `json:"phase"`
	Agent                *AgentRef                           `json:"agent"`
	SDKVersion           string                              `json:"sdk_version"`
	PythonVersion        string                              `json:"python_version"`
	RecordCount          int                                 `json:"record_count"`
	LastSequence         int64                               `json:"last_sequence"`
	UnresolvedOperations []UnresolvedOperation               `json:"unresolved_operations"`
	Artifacts            map[string]exportArtifactDescriptor `json:"artifacts"`
	Members              map[string]exportMemberDescriptor   `json:"members"`
	HXD                  exportWriterInfo                    `json:"hxd"`
}

// exportArtifactDescriptor is one entry of the manifest's "artifacts".
type exportArtifactDescriptor struct {
	Status string `json:"status"`
	Path   string `json:"path,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// exportMemberDescriptor is one entry of the manifest's "members".
type exportMemberDescriptor struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// exportWriterInfo is the manifest's "hxd" key (allowed by DESIGN §8,
// ignored by readers): who wrote the bundle and under which policy, so a
// reviewer can tell "omitted by policy" from "lost". Rules are counted,
// never copied (a pattern may itself be sensitive).
type exportWriterInfo struct {
	Writer           string `json:"writer"`
	IncludePayloads  bool   `json:"include_payloads"`
	IncludeArtifacts bool   `json:"include_artifacts"`
	RedactionRules   int    `json:"redaction_rules"`
	// Signature is the Ed25519 signature of the manifest without it.
	Signature *exportSignature `json:"signature,omitempty"`
}

// manifest returns the canonical manifest.json bytes.
func (b *exportBuilder) manifest() ([]byte, error) {
	unresolved := b.info.Unresolved
	if unresolved == nil {
		unresolved = []UnresolvedOperation{}
	}
	m := exportManifest{
		Format:               FormatName,
		Version:              FormatVersion,
		CreatedAt:            journal.Timestamp(b.info.ExportedAt),
		RunID:                b.info.RunID,
		SessionID:            b.info.SessionID,
		Status:               b.info.Status,
		Phase:                b.info.Phase,
		Agent:                b.info.Agent,
		SDKVersion:           b.info.SDKVersion,
		PythonVersion:        PythonVersion,
		RecordCount:          b.records,
		LastSequence:         b.lastSeq,
		UnresolvedOperations: unresolved,
		Artifacts:            b.artifacts,
		Members:              make(map[string]exportMemberDescriptor, len(b.entries)),
		HXD: exportWriterInfo{
			Writer:           "hxd",
			IncludePayloads:  b.policy.IncludePayloads,
			IncludeArtifacts: b.policy.IncludeArtifacts,
			RedactionRules:   len(b.policy.Redact),
		},
	}
	for _, e := range b.entries {
		m.Members[e.name] = exportMemberDescriptor{SHA256: hex.EncodeToString(e.sha[:]), Size: e.size}
	}
	out, err := journal.Canonical(m)
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	if b.policy.Signer == nil {
		return out, nil
	}
	m.HXD.Signature = b.policy.Signer.sign(out)
	if out, err = journal.Canonical(m); err != nil {
		return nil, fmt.Errorf("encode signed manifest: %w", err)
	}
	return out, nil
}

// exportScanArtifactRefs calls add for every artifact reference in text:
// "artifact://" followed by exactly 64 lowercase hex digits that are not
// followed by another lowercase hex digit (REFERENCE §5.6). text is
// canonical JSON lines, so a reference never spans two lines or batches.
// The search anchors on "//", far rarer in JSON than the letter 'a'.
func exportScanArtifactRefs(text []byte, add func(key string)) {
	const scheme = "artifact:" // before the "//"
	for i := 0; ; {
		j := bytes.IndexByte(text[i:], '/')
		if j < 0 {
			return
		}
		s := i + j // text[s] == '/'
		i = s + 1
		if s+1 >= len(text) || text[s+1] != '/' || s < len(scheme) || string(text[s-len(scheme):s]) != scheme {
			continue
		}
		h := text[s+2:]
		n := 0
		for n < len(h) && n <= exportArtifactKeyLen && exportIsLowerHex(h[n]) {
			n++
		}
		if n == exportArtifactKeyLen {
			add(string(h[:exportArtifactKeyLen]))
		}
		i = s + 2
	}
}

func exportIsLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }
