package v2alpha1

import "testing"

func TestSequencingMode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		def    string
		want   string
	}{
		{"a namespace labelled audit is audited", map[string]string{LabelSequencing: ModeAudit}, ModeEnforce, ModeAudit},
		{"a namespace labelled enforce is enforced whatever the default", map[string]string{LabelSequencing: ModeEnforce}, ModeAudit, ModeEnforce},
		{"a namespace without the label takes the default", map[string]string{"other": "x"}, ModeAudit, ModeAudit},
		{"a namespace with no labels at all takes the default", nil, ModeAudit, ModeAudit},
		{"a blank label enforces, not the default", map[string]string{LabelSequencing: ""}, ModeAudit, ModeEnforce},
		{"a mistyped label enforces", map[string]string{LabelSequencing: "AUDIT"}, ModeAudit, ModeEnforce},
		{"a mistyped default enforces", nil, "audits", ModeEnforce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SequencingMode(tc.labels, tc.def); got != tc.want {
				t.Errorf("SequencingMode(%v, %q) = %q, want %q", tc.labels, tc.def, got, tc.want)
			}
		})
	}
}
