package audit

// What a node's StatefulSets ran: their versions as stored, and what each
// version's current revision makes.

// Set records StatefulSet s as stored at revision rv (0: before the
// auditor's view).
func (j *Judge) Set(rv uint64, s SetSeen) {
	bySet := j.sets[s.Node]
	if bySet == nil {
		bySet = map[string][]setRev{}
		j.sets[s.Node] = bySet
	}
	revs := bySet[s.Name]
	kept := setRev{rv: rv, target: s.Target, current: s.Current, update: s.Update, unobserved: s.Unobserved, gone: s.Gone}
	if n := len(revs); n > 0 && (rv <= revs[n-1].rv && rv != 0 || sameMaking(revs[n-1], kept)) {
		// An older version, or one that makes the same pods (a status
		// write but a new revision's): the last one kept says what it ran
		// from then on.
		return
	}
	kept.currentTarget = j.currentTargetOf(s, revs)
	bySet[s.Name] = append(revs, kept)
}

// currentTargetOf is what StatefulSet s's current revision makes pods for,
// as the judge saw it before s (revs, its versions kept): its own template
// where the two revisions are one; the template of a version whose update
// revision it was; what an earlier version with that current revision
// said; or what a pod made from it carries. A version whose controller had
// not acted on its spec yet (Unobserved: the template written, the status
// not) pairs its template with no revision. "" where none says (judge).
func (j *Judge) currentTargetOf(s SetSeen, revs []setRev) string {
	if s.Current == "" {
		return ""
	}
	if s.Current == s.Update && !s.Unobserved {
		return s.Target
	}
	for i := len(revs) - 1; i >= 0; i-- {
		switch {
		case revs[i].update == s.Current && !revs[i].unobserved:
			return revs[i].target
		case revs[i].current == s.Current && revs[i].currentTarget != "":
			return revs[i].currentTarget
		}
	}
	for _, l := range j.pods[s.Node] {
		if l.set == s.Name && l.revision == s.Current {
			return l.target
		}
	}
	return ""
}

// sameMaking reports whether two versions of a StatefulSet make the same
// pods from the same revisions.
func sameMaking(a, b setRev) bool {
	return a.target == b.target && a.gone == b.gone && a.current == b.current && a.update == b.update && a.unobserved == b.unobserved
}

// madeUpAtUnknownCurrent reports whether pod p was made by its StatefulSet,
// mid-roll when the hold began at held, from the roll's current revision,
// where the judge never learnt what that revision makes (currentTargetOf:
// the auditor found the roll under way with no pod of it). Its own
// revision label is then all there is to go by: a pod the StatefulSet
// makes up as the node ran before the roll.
func (j *Judge) madeUpAtUnknownCurrent(p pendingPod, held, born uint64) bool {
	if !p.pod.FromSet || p.pod.Revision == "" {
		return false
	}
	at := setAt(j.sets[p.pod.Node][p.pod.Set], held)
	return at != nil && !at.gone && (born == 0 || at.rv >= born) && at.currentTarget == "" &&
		at.current == p.pod.Revision && at.current != at.update
}

// setAt is the version of a StatefulSet (revs, in order) stored last at or
// before revision rv; nil when none was.
func setAt(revs []setRev, rv uint64) *setRev {
	var at *setRev
	for i := range revs {
		if revs[i].rv <= rv {
			at = &revs[i]
		}
	}
	return at
}
