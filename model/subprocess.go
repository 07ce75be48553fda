package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Sub-processes (API.md "Sub-processes"): a subprocess node starts child instances of another template and waits
// for them. The parent records its children in its state; a child records its parent.

// MaxSubprocessDepth is how deeply sub-processes may nest at run time: a child of depth 9 is not started
// (node error subprocess_depth).
const MaxSubprocessDepth = 8

// MaxChildren is how many children one for_each visit may start (more: node error too_many_children).
const MaxChildren = 1000

// CompletionAll is the default completion of a for_each sub-process: every child must complete.
const CompletionAll = "all"

// Completion says when a for_each subprocess node continues: when every child completed ("all", the default,
// Min 0) or when Min of them did ({"min":N}; the rest are terminated).
type Completion struct {
	Min int
}

// IsZero reports whether no completion was given ("all").
func (c Completion) IsZero() bool { return c.Min == 0 }

// MarshalJSON writes "all" or {"min":N}.
func (c Completion) MarshalJSON() ([]byte, error) {
	if c.Min == 0 {
		return json.Marshal(CompletionAll)
	}
	return json.Marshal(struct {
		Min int `json:"min"`
	}{c.Min})
}

// UnmarshalJSON reads "all" or {"min":N} with N at least 1.
func (c *Completion) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*c = Completion{}
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s != CompletionAll {
			return fmt.Errorf(`completion must be "all" or {"min": N}, got %q`, s)
		}
		return nil
	case len(b) > 0 && b[0] == '{':
		var v struct {
			Min *int `json:"min"`
		}
		if err := strictUnmarshal(b, &v); err != nil {
			return fmt.Errorf("completion: %s", describeJSONError(err))
		}
		if v.Min == nil || *v.Min < 1 {
			return errors.New(`completion: {"min": N} needs N, at least 1: how many children must complete`)
		}
		c.Min = *v.Min
		return nil
	}
	return fmt.Errorf(`completion must be "all" or {"min": N}, got %s`, jsonKind(b))
}

// ParentRef is a child instance's link to the node of its parent that started it.
type ParentRef struct {
	InstanceID     string `json:"instance_id"`
	NodeID         string `json:"node_id"`
	NodeInstanceID string `json:"node_instance_id"`
	// Index is the child's element of the parent's for_each (0 without one).
	Index int `json:"index"`
	// Depth is the child's nesting depth: 1 for a child of a top-level instance.
	Depth int `json:"depth"`
}

// ChildRef is a child instance as its parent records it.
type ChildRef struct {
	ID             string         `json:"id"`
	Template       string         `json:"template"`
	Version        int            `json:"version"`
	NodeID         string         `json:"node_id"`
	NodeInstanceID string         `json:"node_instance_id"`
	Index          int            `json:"index"`
	Status         InstanceStatus `json:"status"`
	// Cancelled is set when the parent asked for the child's end (its node visit ended first).
	Cancelled bool `json:"cancelled,omitempty"`
}

// SubVisit is what a subprocess node's visit waits for: its children in element order and how many must
// complete.
type SubVisit struct {
	Children  []string          `json:"children"`
	Need      int               `json:"need"`
	Completed int               `json:"completed"`
	Failed    int               `json:"failed"`
	ForEach   bool              `json:"for_each,omitempty"`
	Outputs   []json.RawMessage `json:"outputs,omitempty"`
}

// Outbox kinds of sub-processes.
const (
	// OutboxChildEnded tells a parent that a child ended. Ref = the parent instance id; Payload = ChildEnd.
	OutboxChildEnded = "subprocess.ended"
	// OutboxChildCancel ends a child whose parent's node visit ended. Ref = the child instance id; Payload =
	// ChildCancel.
	OutboxChildCancel = "subprocess.cancel"
)

// ChildEnd is the payload of a subprocess.ended outbox item.
type ChildEnd struct {
	Parent  ParentRef       `json:"parent"`
	ChildID string          `json:"child_id"`
	Status  InstanceStatus  `json:"status"`
	Context json.RawMessage `json:"context,omitempty"`
	Error   *NodeFailure    `json:"error,omitempty"`
}

// ChildCancel is the payload of a subprocess.cancel outbox item.
type ChildCancel struct {
	ParentID string `json:"parent_id"`
	NodeID   string `json:"node_id"`
	Reason   string `json:"reason"`
}
