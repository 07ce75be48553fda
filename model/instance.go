package model

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// Task kinds.
const (
	TaskKindApproval   = "approval"    // a signer of the node's sign set
	TaskKindSignBefore = "sign_before" // added with add-sign before: decides before its parent
	TaskKindSignAfter  = "sign_after"  // added with add-sign after: decides after its parent approved
	TaskKindResubmit   = "resubmit"    // returned to the initiator
)

// Edge states (InstanceState.Edges, index-aligned with the definition's edges). Every incoming edge of a node
// ends up taken, pruned or killed (API.md "Semantics changes").
const (
	EdgeUnknown byte = 0
	EdgeTaken   byte = 1
	// EdgeDead is the "not taken" of instances written before pruned and killed were told apart. It is read,
	// never written: the engine turns it into pruned (its source completed: routing did not choose it) or
	// killed (its source was rejected, failed, cancelled, or skipped because of a killed edge) when it loads
	// such an instance (see engine.upgradeEdges).
	EdgeDead   byte = 2
	EdgePruned byte = 3 // routing did not choose it: a false condition, a default edge whose sibling was taken, a source skipped as pruned
	EdgeKilled byte = 4 // its source was rejected or failed, or skipped as killed
)

// Node error codes (API.md "Semantics changes"): every node error carries one. The sub-process codes are raised
// by the sub-process nodes only.
const (
	NodeErrPluginFailed     = "plugin_failed"     // a plugin exited non-zero, answered nonsense, or is not uploaded
	NodeErrPluginTimeout    = "plugin_timeout"    // an auto node's timeout passed before its plugins were through
	NodeErrNoApprover       = "no_approver"       // nobody (existing and enabled) to decide an approval node
	NodeErrNoRoute          = "no_route"          // no outgoing edge of a completed node (or a join) can be taken
	NodeErrCallbackTimeout  = "callback_timeout"  // a callback node's timeout passed without a callback, with no timeout_branch
	NodeErrApprovalTimeout  = "approval_timeout"  // an approval node's timeout passed and it has no on_timeout
	NodeErrBadUntil         = "bad_until"         // a delay node's until is not a time
	NodeErrSubprocessFailed = "subprocess_failed" // a child instance ended rejected, failed or terminated
	NodeErrSubprocessDepth  = "subprocess_depth"  // sub-processes nested deeper than allowed
	NodeErrTooManyChildren  = "too_many_children" // a for_each sub-process over too many elements
)

// NodeFailure is a node's error as the instance shows it (`error`), as a catch branch reads it (`context.error`)
// and as the history item node.failed carries it.
type NodeFailure struct {
	Code    string          `json:"code"`
	NodeID  string          `json:"node_id"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Instance is one run of a template version.
type Instance struct {
	ID       string `json:"id"`
	TenantID string `json:"-"`
	Template string `json:"template"`
	Version  int    `json:"version"`
	Title    string `json:"title"`
	// TitleI18n is the title in each language (zh-CN, en) when it was rendered from the template's title pattern.
	TitleI18n     map[string]string `json:"title_i18n,omitempty"`
	Status        InstanceStatus    `json:"status"`
	Initiator     string            `json:"initiator"`
	CorrelationID string            `json:"correlation_id"`
	Context       json.RawMessage   `json:"context"`
	CreatedAt     time.Time         `json:"created_at"`
	UpdatedAt     time.Time         `json:"updated_at"`
	EndedAt       *time.Time        `json:"ended_at"`
	State         InstanceState     `json:"-"`
	Rev           int64             `json:"-"` // bumped at every change
}

// Ended reports whether the instance reached a final status.
func (i *Instance) Ended() bool { return i.Status.Ended() }

// InstanceState is the engine's state of an instance: where each node is and which edges were taken. It is
// stored as one JSON document in the instance row, so that one step reads and writes one row.
type InstanceState struct {
	Nodes map[string]*NodeVisit `json:"nodes"`
	// Edges holds one EdgeUnknown/EdgeTaken/EdgeDead per edge of the definition, in definition order.
	Edges []byte `json:"edges"`
	// Seq numbers node visits and tasks; ids are derived from it (see NodeInstanceID, TaskID).
	Seq int `json:"seq"`
	// Error is the last unhandled node error (thrown to the error node or failing the instance), if any.
	Error *NodeFailure `json:"error,omitempty"`
	// Parent is set on a child instance of a subprocess node (model/subprocess.go).
	Parent *ParentRef `json:"parent,omitempty"`
	// Children are the child instances the subprocess nodes started, in the order they started.
	Children []*ChildRef `json:"children,omitempty"`
	// Pins are the latest published versions of the templates the subprocess nodes start without a version,
	// as they were when the instance started.
	Pins map[string]int `json:"pins,omitempty"`
	// UrgedAt is when the instance was last urged (催办): the next urge is refused until UrgeInterval later.
	UrgedAt *time.Time `json:"urged_at,omitempty"`
	// Awaited is set on an instance a sync start waits for: its end is published to the other replicas (the end
	// bus), where the wait may be; the ends of the others are not (nobody waits for them).
	Awaited bool `json:"awaited,omitempty"`
}

// NodeVisit is one node of an instance at its current visit.
//
// The store writes a visit in a short form of its own (service/store, state.go: short keys, times as Unix
// nanoseconds), without what it derives again when it reads the row: NodeID (the visit's key in Nodes),
// NodeInstanceID (the instance id + ".n" + Seq, as the engine numbers visits), a Name equal to NodeID. A field
// added here needs its place in that form too (a store test fails until it has one).
type NodeVisit struct {
	NodeID         string     `json:"node_id,omitempty"`
	Name           string     `json:"name,omitempty"`
	Type           string     `json:"type"`
	State          NodeState  `json:"state"`
	NodeInstanceID string     `json:"node_instance_id,omitempty"`
	Visit          int        `json:"visit"`
	StartedAt      *time.Time `json:"started_at,omitempty"`
	EndedAt        *time.Time `json:"ended_at,omitempty"`
	Attempt        int        `json:"attempt,omitempty"` // retries taken by the error handler
	Error          string     `json:"error,omitempty"`
	ErrorCode      string     `json:"error_code,omitempty"` // the code of Error
	CallbackURL    string     `json:"callback_url,omitempty"`
	WaitingFor     string     `json:"waiting_for,omitempty"` // what a waiting node waits for: delay, callback, message, retry, plugin
	Seq            int        `json:"seq"`                   // activation order (for listing)
	// Groups tallies the decisions of an approval node per signer group (one group without parallel sign).
	Groups []SignTally `json:"groups,omitempty"`
	// Timers are the ids of the visit's pending timers (cancelled when the visit ends).
	Timers []string `json:"timers,omitempty"`
	// Chain is the plugin chain the visit is running (pre, auto or after plugins), if any.
	Chain *PluginChain `json:"chain,omitempty"`
	// AfterDone is set once the visit's after plugins ran (so completing does not run them twice).
	AfterDone bool `json:"after_done,omitempty"`
	// PreDone is set once the visit's pre plugins ran.
	PreDone bool `json:"pre_done,omitempty"`
	// Sub is what a subprocess node's visit waits for (its children).
	Sub *SubVisit `json:"sub,omitempty"`
	// ApprovedBy lists who approved a task of this visit (options.dedupe reads it).
	ApprovedBy []string `json:"approved_by,omitempty"`
	// AutoTasks are the visit's tasks decided automatically when their turn comes (sequential sign), with why:
	// task id -> reason (model.AutoSelfApproval, model.AutoDedupe).
	AutoTasks map[string]string `json:"auto_tasks,omitempty"`
}

// PluginChain is a node visit's plugins running one after another.
type PluginChain struct {
	Phase    string   `json:"phase"` // pre, auto, after
	Names    []string `json:"names"`
	Index    int      `json:"index"`
	RunID    string   `json:"run_id"`
	Then     string   `json:"then"`               // what happens when the chain is through: run, complete, reject
	Decision string   `json:"decision,omitempty"` // an auto plugin's decision
}

// SignTally counts the decisions of one signer group of an approval node.
type SignTally struct {
	Total    int     `json:"total"`
	Approved int     `json:"approved"`
	Rejected int     `json:"rejected"`
	Outcome  Outcome `json:"outcome,omitempty"`
}

// Outcome is what a signer group decided.
type Outcome string

// Outcomes of a signer group.
const (
	OutcomeUndecided Outcome = ""
	OutcomeApproved  Outcome = "approved"
	OutcomeRejected  Outcome = "rejected"
)

// Active reports whether the node is running or waiting.
func (n *NodeVisit) Active() bool { return n.State.Open() }

// Task is an approval work item.
type Task struct {
	ID             string          `json:"id"`
	TenantID       string          `json:"-"`
	InstanceID     string          `json:"instance_id"`
	NodeID         string          `json:"node_id"`
	NodeName       string          `json:"node_name"`
	NodeInstanceID string          `json:"node_instance_id"`
	Assignee       string          `json:"assignee"`
	Status         TaskStatus      `json:"status"`
	Kind           string          `json:"kind"`
	Group          int             `json:"group"`    // parallel-sign group index (0 without groups)
	Position       int             `json:"position"` // order within the node visit (sequential sign)
	ParentID       string          `json:"parent_id,omitempty"`
	AfterSigners   []string        `json:"after_signers,omitempty"` // add-sign after: who signs once this task is approved
	Comment        string          `json:"comment"`
	Data           json.RawMessage `json:"data,omitempty"`
	DecidedBy      string          `json:"decided_by,omitempty"` // differs from the assignee when an admin acted for them
	// Auto: decided automatically (no approver, self approval, dedupe); the history item says why.
	Auto bool `json:"auto"`
	// DelegatedFrom: the user this task was meant for, who delegated it to the assignee (out of office).
	DelegatedFrom string `json:"delegated_from,omitempty"`
	// UrgedAt: when the initiator (or an admin) last urged the task's instance while the task was pending.
	UrgedAt   *time.Time `json:"urged_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	DecidedAt *time.Time `json:"decided_at"`
	// Denormalised for inbox listings.
	Title     string `json:"title"`
	Template  string `json:"template"`
	Initiator string `json:"initiator"`
}

// Open reports whether the task is still to be decided.
func (t *Task) Open() bool { return t.Status.Open() }

// HistoryEvent is one line of an instance's history.
type HistoryEvent struct {
	Seq        int64           `json:"-"`
	InstanceID string          `json:"-"`
	At         time.Time       `json:"at"`
	Actor      string          `json:"actor"`
	Action     string          `json:"action"`
	NodeID     string          `json:"node_id"`
	TaskID     string          `json:"task_id"`
	Comment    string          `json:"comment"`
	Data       json.RawMessage `json:"data"`
}

// Bookmark kinds.
const (
	BookmarkApproval = "approval"
	BookmarkCallback = "callback"
	BookmarkMessage  = "message"
	BookmarkDelay    = "delay"
	BookmarkPlugin   = "plugin"
	BookmarkRetry    = "retry"
)

// Bookmark is a wait that something outside the engine resumes (seeds/001).
type Bookmark struct {
	ID             string          `json:"id"`
	TenantID       string          `json:"-"`
	InstanceID     string          `json:"instance_id"`
	NodeID         string          `json:"node_id"`
	NodeInstanceID string          `json:"node_instance_id"`
	Kind           string          `json:"kind"`
	Hash           string          `json:"hash"` // of (kind, message name, correlation id): how messages find it
	MessageName    string          `json:"message_name,omitempty"`
	CorrelationID  string          `json:"correlation_id"`
	Payload        json.RawMessage `json:"payload"`
	CreatedAt      time.Time       `json:"created_at"`
	ClosedAt       *time.Time      `json:"closed_at,omitempty"`
}

// Message is a message that arrived before the bookmark waiting for it (queued until ExpiresAt).
type Message struct {
	ID            string
	TenantID      string
	Name          string
	CorrelationID string
	Hash          string
	Data          json.RawMessage
	CreatedAt     time.Time
	ExpiresAt     time.Time
}

// Timer kinds.
const (
	TimerDelay           = "delay"
	TimerCallbackTimeout = "callback_timeout"
	TimerApprovalTimeout = "approval_timeout"
	TimerRetry           = "retry"
	TimerCrontab         = "crontab"
	TimerPluginTimeout   = "plugin_timeout" // an auto node's timeout: bounds its plugin runs, async waits included
)

// Timer statuses.
const (
	TimerPending   = "pending"
	TimerFired     = "fired"
	TimerCancelled = "cancelled"
)

type timerFiringKey struct{}

// ForTimerFiring marks ctx as the firing of due timers: the store runs its transactions on the connections it
// keeps for timers (HALLEY_DB_TIMER_CONNS), so a fire never queues for a connection behind a step load.
func ForTimerFiring(ctx context.Context) context.Context {
	return context.WithValue(ctx, timerFiringKey{}, true)
}

// IsTimerFiring reports whether ctx was marked by ForTimerFiring.
func IsTimerFiring(ctx context.Context) bool {
	v, _ := ctx.Value(timerFiringKey{}).(bool)
	return v
}

// Timer is a durable due time; the scheduler is its fast index.
type Timer struct {
	ID             string          `json:"id"`
	TenantID       string          `json:"-"`
	InstanceID     string          `json:"instance_id"`
	NodeID         string          `json:"node_id"`
	NodeInstanceID string          `json:"node_instance_id"`
	Kind           string          `json:"kind"`
	DueAt          time.Time       `json:"due_at"`
	Status         string          `json:"status"`
	Payload        json.RawMessage `json:"payload"`
	CreatedAt      time.Time       `json:"created_at"`
	FiredAt        *time.Time      `json:"fired_at"`
}

// Outbox kinds.
const (
	OutboxTimerArm    = "timer.arm"    // Ref = timer id; Payload = TimerArm
	OutboxTimerCancel = "timer.cancel" // Ref = timer id
	OutboxPluginRun   = "plugin.run"   // Ref = plugin run id
	OutboxEvent       = "event"        // Payload = the event
)

// TimerArm is the payload of a timer.arm outbox item: when the timer is due, in unix milliseconds.
type TimerArm struct {
	Due int64 `json:"due"`
}

// TimerArmPayload is the payload of a timer.arm outbox item for a timer due at due (whole milliseconds).
func TimerArmPayload(due time.Time) json.RawMessage {
	return json.RawMessage(`{"due":` + strconv.FormatInt(due.UnixMilli(), 10) + `}`)
}

// DueAt is the due time a timer.arm payload carries.
func (a TimerArm) DueAt() time.Time { return time.UnixMilli(a.Due) }

// OutboxItem is a side effect written in the engine's transaction and dispatched after it commits.
type OutboxItem struct {
	Seq       int64
	TenantID  string
	Kind      string
	Ref       string
	Payload   json.RawMessage
	CreatedAt time.Time
}

// StepEvent is an engine event as a step raised it, for the sinks that take events within the step's own
// transaction (engine.InStepSink). The outbox payload of the same event carries the same fields in JSON.
type StepEvent struct {
	// Key names the event uniquely and the same way each time the step runs: <instance id>.<rev>.<n>, the n-th
	// event of the step that took the instance to rev. Its outbox payload carries it too ("key"), so that a
	// consumer handling it on either path writes the same rows.
	Key        string
	Name       string
	At         time.Time
	TenantID   string
	InstanceID string
	Template   string
	Status     InstanceStatus
	NodeID     string
	Task       *Task
	Title      string
	Initiator  string
	// Set by some events: the users copied (cc.created), the node's name, who acted and what they said (task.urged).
	Users    []string
	NodeName string
	Actor    string
	Comment  string
	// The texts in each language the definition or the instance has.
	TitleI18n    map[string]string
	NodeI18n     map[string]string
	TemplateName string
	TemplateI18n map[string]string
}

// CCRecord says a user was copied on an instance when a node activated (抄送).
type CCRecord struct {
	ID         string     `json:"id"`
	TenantID   string     `json:"-"`
	InstanceID string     `json:"instance_id"`
	NodeID     string     `json:"node_id"`
	Username   string     `json:"username"`
	CreatedAt  time.Time  `json:"created_at"`
	ReadAt     *time.Time `json:"read_at"`
	Read       bool       `json:"read"`
	// Filled when listing.
	Title    string         `json:"title"`
	Template string         `json:"template"`
	Status   InstanceStatus `json:"status"`
}

// Work is one engine transaction on one instance: the instance and its open tasks as read under the row lock,
// and everything the engine adds or changes. The store writes it back in a few batched statements.
type Work struct {
	Instance *Instance
	// Tasks are the instance's open tasks (pending, waiting) when the work began, plus tasks created in it.
	Tasks []*Task

	NewTasks       []*Task
	ChangedTasks   map[string]*Task
	History        []HistoryEvent
	NewBookmarks   []*Bookmark
	CloseBookmarks []string // by node instance id: every open bookmark of that node visit
	NewTimers      []*Timer
	CancelTimers   []string // by node instance id: every pending timer of that node visit
	FiredTimers    []string // timer ids marked fired
	ConsumeMessage []string // queued message ids consumed
	Outbox         []OutboxItem
	// Notifications and NotificationDeliveries are written with the step (an in-step event sink took events:
	// engine.InStepSink); a row whose unique key exists is left out.
	Notifications          []*Notification
	NotificationDeliveries []*NotificationDelivery
	CC                     []*CCRecord
	NewPluginRuns          []*PluginRun
	// RunUpdates record plugin run results. Each is applied only if the run is still in one of FromStatus (a
	// run finished twice makes the whole transaction fail with ECONFLICT).
	RunUpdates []RunUpdate
	// RunLogs are plugin run log records written with the work (an attempt's log in the transaction that records
	// its result); a record whose (run, attempt) exists is left out.
	RunLogs []*PluginRunLog
	// Fence, when set, is written with the work (idempotency_commits): the request's Idempotency-Key did it.
	Fence *IdempotencyFence
	// Audit, when set, is written with the work (audit_log): an admin's jump, a terminate, an override start.
	Audit *AuditEntry
	// Children are instances started by the step (subprocess nodes), each with the work of its first step:
	// inserted in the same transaction.
	Children []*Work
}

// WithChildren returns the works and, after each, the works of the instances it started (recursively).
func WithChildren(ws []*Work) []*Work {
	n := 0
	for _, w := range ws {
		n += len(w.Children)
	}
	if n == 0 {
		return ws
	}
	out := make([]*Work, 0, len(ws)+n)
	for _, w := range ws {
		out = append(out, w)
		out = append(out, WithChildren(w.Children)...)
	}
	return out
}

// RunUpdate is a plugin run's new state, applied when its status is one of From.
type RunUpdate struct {
	Run  *PluginRun
	From []string
	// Close writes only the status, the error and the end time (timed out or cancelled by the engine): what the
	// run printed so far is kept.
	Close bool
}

// PluginRun statuses.
const (
	RunQueued    = "queued"
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunTimedOut  = "timed_out"
	RunWaiting   = "waiting"   // replied {"async":true}: waits for POST /plugin-runs/{id}/result
	RunCancelled = "cancelled" // its node visit ended before it did (terminate, withdraw, jump, return, a caught error elsewhere)
)

// PluginRun is one execution of a plugin for a node.
type PluginRun struct {
	ID             string          `json:"id"`
	TenantID       string          `json:"-"`
	Plugin         string          `json:"plugin"`
	Version        int             `json:"version"`
	InstanceID     string          `json:"instance_id"`
	NodeID         string          `json:"node_id"`
	NodeInstanceID string          `json:"node_instance_id"`
	Phase          string          `json:"phase"`
	Status         string          `json:"status"`
	Attempt        int             `json:"attempt"`
	ExitCode       *int            `json:"exit_code"`
	Input          json.RawMessage `json:"-"`
	Output         json.RawMessage `json:"output,omitempty"`
	Error          string          `json:"error,omitempty"`
	Stdout         string          `json:"stdout"`
	Stderr         string          `json:"stderr"`
	CreatedAt      time.Time       `json:"created_at"`
	StartedAt      *time.Time      `json:"started_at"`
	EndedAt        *time.Time      `json:"ended_at"`
	DurationMS     *int64          `json:"duration_ms"`
	LeaseOwner     string          `json:"-"`
	LeaseUntil     *time.Time      `json:"-"`
}

// InstanceFilter selects instances for GET /instances.
type InstanceFilter struct {
	TenantID      string
	Status        InstanceStatus
	Template      string
	Initiator     string
	CorrelationID string
	// Visible restricts to instances the user started, has or had a task in, or was copied on ("" = all).
	VisibleTo string
	Page      Page
}

// Why an instance needs an admin's attention (GET /instances?needs_attention=true): its `reason`.
const (
	AttentionFailed           = "failed"            // the instance failed; error_code is its node error's code
	AttentionAssigneeDisabled = "assignee_disabled" // running, with an open task for a disabled user
	AttentionAssigneeDeleted  = "assignee_deleted"  // running, with an open task for a user who no longer exists
)

// AttentionTask is an open task whose assignee cannot act: disabled or deleted.
type AttentionTask struct {
	TaskID   string `json:"task_id"`
	NodeID   string `json:"node_id"`
	NodeName string `json:"node_name"`
	Assignee string `json:"assignee"`
	Reason   string `json:"reason"` // AttentionAssigneeDisabled or AttentionAssigneeDeleted
}

// AttentionItem is one instance of the needs-attention list: the instance, why it is there (reason, and the error
// code: the node error's code for a failed instance, the reason itself for a stuck task), the failure and the
// stuck tasks.
type AttentionItem struct {
	*Instance
	Reason    string          `json:"reason"`
	ErrorCode string          `json:"error_code"`
	Error     *NodeFailure    `json:"error"`
	Tasks     []AttentionTask `json:"attention_tasks"`
}

// TaskFilter selects tasks for GET /tasks.
type TaskFilter struct {
	TenantID   string
	Assignee   string     // "" = any
	Status     TaskStatus // "" = any
	InstanceID string
	Page       Page
}

// InstanceStore keeps instances and what hangs off them. UpdateInstance is the one way an instance changes.
type InstanceStore interface {
	// CreateInstance writes a new instance and the work of its first step in one transaction.
	CreateInstance(ctx context.Context, w *Work) error
	// UpdateInstance locks the instance row, loads it and its open tasks, calls fn, and writes back what fn
	// changed, all in one transaction (retried on deadlocks). ENOTFOUND wrapping ErrNoInstance when there is no
	// such instance (EGONE when it was archived).
	UpdateInstance(ctx context.Context, tenant, id string, fn func(w *Work) error) error
	// GetInstance reads an instance (without locking) and all its tasks.
	GetInstance(ctx context.Context, tenant, id string) (*Instance, []*Task, error)
	ListInstances(ctx context.Context, f InstanceFilter) ([]*Instance, string, error)
	// ListNeedsAttention lists, newest first, the tenant's failed instances and running ones with an open task
	// for a disabled or deleted user, each with its reason (see AttentionItem).
	ListNeedsAttention(ctx context.Context, tenant string, p Page) ([]*AttentionItem, string, error)
	GetTask(ctx context.Context, tenant, id string) (*Task, error)
	ListTasks(ctx context.Context, f TaskFilter) ([]*Task, string, error)
	History(ctx context.Context, tenant, instanceID string) ([]HistoryEvent, error)
	OpenBookmarks(ctx context.Context, tenant, instanceID string) ([]*Bookmark, error)
	GetBookmark(ctx context.Context, tenant, id string) (*Bookmark, error)
	// FindBookmarks lists open bookmarks with the hash (message name + correlation id).
	FindBookmarks(ctx context.Context, tenant, hash string) ([]*Bookmark, error)
	// QueueMessage stores a message nobody waits for yet.
	QueueMessage(ctx context.Context, m *Message) error
	// TakeMessage returns a queued, unexpired message with the hash (oldest first), or nil.
	FindMessage(ctx context.Context, tenant, hash string, now time.Time) (*Message, error)
	PurgeMessages(ctx context.Context, before time.Time) (int64, error)
	IsCC(ctx context.Context, tenant, instanceID, username string) (bool, error)
	ListCC(ctx context.Context, tenant, username string, page Page) ([]*CCRecord, string, error)
	MarkCCRead(ctx context.Context, tenant, username, id string, at time.Time) error
	// HasTaskIn reports whether the user has or had a task in the instance.
	HasTaskIn(ctx context.Context, tenant, instanceID, username string) (bool, error)
}

// BatchInstanceStore changes several instances in one transaction, so that concurrent steps share its statements
// and its commit (group commit).
type BatchInstanceStore interface {
	// UpdateInstances locks the instances with these distinct ids (all of tenant) in id order, loads each with its
	// open tasks, calls fn for each one found, and writes back, in one transaction, the works for which fn returned
	// nil. It answers each id's outcome: nil (written), fn's error (that work was not written) or ENOTFOUND
	// wrapping ErrNoInstance. The
	// transaction is retried on deadlocks, fn then running again on fresh works. An error of the whole call (a
	// database error, ErrStaleRead, ECONFLICT for a plugin run finished twice) means nothing was written.
	//
	// creates are new instances (of tenant, not yet stored) written in the same transaction, as CreateInstance
	// would: groups of steps may include starts. A create that cannot be written fails the whole call.
	UpdateInstances(ctx context.Context, tenant string, ids []string, fn func(w *Work) error, creates ...*Work) (map[string]error, error)
}

// MessageTrigger is a template whose latest published version starts on a message name.
type MessageTrigger struct {
	Key     string
	Version int
}

// MessageStore keeps message ids (de-duplication of POST /messages) and the message start triggers.
type MessageStore interface {
	// ClaimMessageID records a message id as being handled by the caller (claimed true), unless it was seen:
	// then it returns the stored answer of the first request (answer non-nil), or nil while that request is
	// still running. A claim left without an answer since before staleBefore (its request died) is taken over.
	ClaimMessageID(ctx context.Context, tenant, id string, now, staleBefore time.Time) (answer []byte, claimed bool, err error)
	// FinishMessageID stores the answer of the request that claimed the id.
	FinishMessageID(ctx context.Context, tenant, id string, answer []byte) error
	// AbandonMessageID forgets a claim whose request failed before it did anything, so a retry may run.
	AbandonMessageID(ctx context.Context, tenant, id string) error
	// PurgeMessageIDs deletes message ids recorded before t.
	PurgeMessageIDs(ctx context.Context, before time.Time) (int64, error)
	// SetMessageTrigger records the message name a template's latest version starts on ("" = none).
	SetMessageTrigger(ctx context.Context, tenant, key string, version int, message string) error
	// MessageTriggers lists the templates that start on a message name, by key.
	MessageTriggers(ctx context.Context, tenant, message string) ([]MessageTrigger, error)
}

// TimerStore reads timer rows for the scheduler.
type TimerStore interface {
	// GetTimers returns the timers with these ids (missing ids are left out).
	GetTimers(ctx context.Context, ids []string) ([]*Timer, error)
	// PendingTimers pages through pending timers by id (to re-arm the scheduler from the database).
	PendingTimers(ctx context.Context, afterID string, limit int) ([]*Timer, error)
	// SaveTimer writes (or replaces) a timer that belongs to no instance (crontab starts).
	SaveTimer(ctx context.Context, t *Timer) error
	// MarkTimerFired marks a pending timer fired; false when it was not pending (already fired or cancelled).
	MarkTimerFired(ctx context.Context, id string, at time.Time) (bool, error)
}

// OutboxStore hands committed outbox rows to the dispatcher.
type OutboxStore interface {
	// DispatchOutbox calls fn with up to limit undispatched items, oldest first, and deletes them when fn returns
	// nil, in one transaction (rows other dispatchers hold are skipped). It returns how many it dispatched.
	DispatchOutbox(ctx context.Context, limit int, fn func(ctx context.Context, items []OutboxItem) error) (int, error)
}
