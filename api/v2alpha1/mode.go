package v2alpha1

// SequencingMode is the sequencing mode of a namespace with labels (DESIGN
// §9): its LabelSequencing label, or def when it has none. Any value but
// ModeAudit enforces, the empty value too: a mistyped or blank label holds
// rather than lets go. The webhooks, the sequencer and the order auditor
// all read a namespace's mode by it, so that none judges a namespace in
// audit that the others enforce.
func SequencingMode(labels map[string]string, def string) string {
	m, ok := labels[LabelSequencing]
	if !ok {
		m = def
	}
	if m == ModeAudit {
		return ModeAudit
	}
	return ModeEnforce
}
