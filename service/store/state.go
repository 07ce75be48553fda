package store

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/halley-bpm/halley/model"
)

// The instance state is written and read back at every step: the whole document goes into the step's statement,
// where MariaDB lexes it character by character and escapes each of its quotes, and the step cache decodes it
// again for the next step. So the store writes it in a short form of its own, which only the store reads:
//
//   - the visits as a list under "n" instead of an object under "nodes", each with one- or two-letter keys
//     (storedVisit);
//   - what the engine derives again left out: the node id (the visit's key), the node instance id when it is the
//     one the engine gives a visit (the instance id + ".n" + its seq), a name equal to the node id, a visit
//     number of 1, tallies of 0;
//   - times as Unix nanoseconds, not RFC 3339 text.
//
// A visit of an approval node that was 263 bytes in the full form is ~150 here (docs/benchmarks.md, "The state in
// a short form"). The rest of the state (edges, seq, error, children, ...) keeps its keys: it is small, or rare.
// Rows written in an earlier form — the full one, or the full one without the derived fields — read as before.
// An earlier Halley cannot read a row in this form: a downgrade needs the instances to be written again by it
// (CHANGELOG).

// storedState is the state as the row holds it. Its Nodes, at the top, hides the embedded state's: it reads the
// visits of rows written in an earlier form and is never written. The rest of model.InstanceState is written with
// its own keys, none of which may be "n".
type storedState struct {
	model.InstanceState
	Nodes  map[string]*model.NodeVisit `json:"nodes,omitempty"`
	Visits []storedVisit               `json:"n"` // in activation order
}

// storedVisit is a model.NodeVisit in the short form (a test fills every field of NodeVisit and reads it back,
// so a field added there and not here fails it).
type storedVisit struct {
	Key            string             `json:"k"`            // its key in the state's nodes
	NodeID         string             `json:"id,omitempty"` // when it is not the visit's key
	Name           string             `json:"n,omitempty"`  // when it is not the node id
	Type           string             `json:"t"`
	State          model.NodeState    `json:"s"`
	NodeInstanceID string             `json:"i,omitempty"` // when it is not the one the engine gives
	Visit          int                `json:"v,omitempty"` // the visit number − 1
	StartedAt      int64              `json:"a,omitempty"` // Unix nanoseconds; 0: not set
	EndedAt        int64              `json:"b,omitempty"`
	Attempt        int                `json:"at,omitempty"`
	Error          string             `json:"e,omitempty"`
	ErrorCode      string             `json:"ec,omitempty"`
	CallbackURL    string             `json:"cb,omitempty"`
	WaitingFor     string             `json:"w,omitempty"`
	Seq            int                `json:"q,omitempty"`
	Groups         []storedTally      `json:"g,omitempty"`
	Timers         []string           `json:"tm,omitempty"`
	Chain          *model.PluginChain `json:"ch,omitempty"`
	AfterDone      bool               `json:"ad,omitempty"`
	PreDone        bool               `json:"pd,omitempty"`
	Sub            *model.SubVisit    `json:"sub,omitempty"`
	ApprovedBy     []string           `json:"ab,omitempty"`
	AutoTasks      map[string]string  `json:"au,omitempty"`
}

type storedTally struct {
	Total    int           `json:"t,omitempty"`
	Approved int           `json:"a,omitempty"`
	Rejected int           `json:"r,omitempty"`
	Outcome  model.Outcome `json:"o,omitempty"`
}

// encodeState encodes an instance's state for its row, in the short form.
func encodeState(i *model.Instance) ([]byte, error) {
	ss := storedState{InstanceState: i.State}
	if i.State.Nodes != nil {
		prefix := i.ID + ".n"
		ss.Visits = make([]storedVisit, 0, len(i.State.Nodes))
		for key, ns := range i.State.Nodes {
			if ns != nil { // a nil visit (none the engine makes) is left out
				ss.Visits = append(ss.Visits, shortVisit(key, prefix, ns))
			}
		}
		// In activation order: the same state, the same bytes.
		slices.SortFunc(ss.Visits, func(a, b storedVisit) int { return cmp.Or(cmp.Compare(a.Seq, b.Seq), strings.Compare(a.Key, b.Key)) })
	}
	return gojson.Marshal(&ss)
}

// decodeState reads the state of instance id from its row, in any of the forms Halley has written.
func decodeState(id string, b []byte) (model.InstanceState, error) {
	var ss storedState
	if err := gojson.Unmarshal(b, &ss); err != nil {
		return model.InstanceState{}, err
	}
	st := ss.InstanceState
	prefix := id + ".n"
	if ss.Visits != nil {
		st.Nodes = make(map[string]*model.NodeVisit, len(ss.Visits))
		visits := make([]model.NodeVisit, len(ss.Visits))
		for n := range ss.Visits {
			fullVisit(&visits[n], prefix, &ss.Visits[n])
			st.Nodes[ss.Visits[n].Key] = &visits[n]
		}
		return st, nil
	}
	// An earlier form: the visits in full, or without what the engine derives (the node id, a node instance id it
	// gives, a name equal to the node id).
	st.Nodes = ss.Nodes
	for key, ns := range st.Nodes {
		if ns == nil {
			continue
		}
		if ns.NodeID == "" {
			ns.NodeID = key
		}
		if ns.NodeInstanceID == "" {
			ns.NodeInstanceID = prefix + strconv.Itoa(ns.Seq)
		}
		if ns.Name == "" {
			ns.Name = ns.NodeID
		}
	}
	return st, nil
}

// shortVisit is visit ns, under key in an instance whose node instance ids start with prefix, in the short form.
func shortVisit(key, prefix string, ns *model.NodeVisit) storedVisit {
	sv := storedVisit{Key: key, Type: ns.Type, State: ns.State, Visit: ns.Visit - 1, StartedAt: nanos(ns.StartedAt), EndedAt: nanos(ns.EndedAt),
		Attempt: ns.Attempt, Error: ns.Error, ErrorCode: ns.ErrorCode, CallbackURL: ns.CallbackURL, WaitingFor: ns.WaitingFor, Seq: ns.Seq,
		Timers: ns.Timers, Chain: ns.Chain, AfterDone: ns.AfterDone, PreDone: ns.PreDone, Sub: ns.Sub, ApprovedBy: ns.ApprovedBy,
		AutoTasks: ns.AutoTasks}
	if ns.NodeID != key {
		sv.NodeID = ns.NodeID
	}
	if ns.Name != ns.NodeID {
		sv.Name = ns.Name
	}
	if ns.NodeInstanceID != prefix+strconv.Itoa(ns.Seq) {
		sv.NodeInstanceID = ns.NodeInstanceID
	}
	if ns.Groups != nil {
		sv.Groups = make([]storedTally, len(ns.Groups))
		for i, g := range ns.Groups {
			sv.Groups[i] = storedTally(g)
		}
	}
	return sv
}

// fullVisit is shortVisit turned round, into ns.
func fullVisit(ns *model.NodeVisit, prefix string, sv *storedVisit) {
	*ns = model.NodeVisit{NodeID: sv.NodeID, Name: sv.Name, Type: sv.Type, State: sv.State, NodeInstanceID: sv.NodeInstanceID, Visit: sv.Visit + 1,
		StartedAt: fromNanos(sv.StartedAt), EndedAt: fromNanos(sv.EndedAt), Attempt: sv.Attempt, Error: sv.Error, ErrorCode: sv.ErrorCode,
		CallbackURL: sv.CallbackURL, WaitingFor: sv.WaitingFor, Seq: sv.Seq, Timers: sv.Timers, Chain: sv.Chain, AfterDone: sv.AfterDone,
		PreDone: sv.PreDone, Sub: sv.Sub, ApprovedBy: sv.ApprovedBy, AutoTasks: sv.AutoTasks}
	if ns.NodeID == "" {
		ns.NodeID = sv.Key
	}
	if ns.Name == "" {
		ns.Name = ns.NodeID
	}
	if ns.NodeInstanceID == "" {
		ns.NodeInstanceID = prefix + strconv.Itoa(ns.Seq)
	}
	if sv.Groups != nil {
		ns.Groups = make([]model.SignTally, len(sv.Groups))
		for i, g := range sv.Groups {
			ns.Groups[i] = model.SignTally(g)
		}
	}
}

// nanos is t as Unix nanoseconds, 0 for none. The engine's times are its clock's, well inside the years
// 1678–2262 that int64 nanoseconds hold; the Unix epoch itself would read back as no time.
func nanos(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) *time.Time {
	if n == 0 {
		return nil
	}
	t := time.Unix(0, n).UTC()
	return &t
}
