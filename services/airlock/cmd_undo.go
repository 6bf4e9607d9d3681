package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/airlock/internal/snapshot"
	"github.com/airlock-gate/airlock/services/hooks"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// maxUndoneListed bounds the paths an undone event lists.
const maxUndoneListed = 50

func newUndoCmd(g *globals) *cobra.Command {
	opts := &hookOptions{}
	var force bool
	var by string
	cmd := &cobra.Command{
		Use:   "undo AGENT/CALL_ID",
		Short: "Put back the files a coding agent's call changed, from the snapshot airlock's hook took before it",
		Long: `Restores what ` + "`airlock hook`" + ` saved just before it allowed the call: in a git work
tree the commit kept in the hook's state dir (snapshots/AGENT/CALL_ID/objects:
the repository's index, branch, HEAD, refs and objects are left alone), elsewhere the copies in the hook's state dir. Only
the files the call changed are put back (a file it created is removed).

A git snapshot keeps in its own object directory every object no ref of the
repository reaches, so git gc does not take it away; an object only a ref
reaches stays borrowed from the repository, and a history rewrite followed by
a prune can still lose it.

Undo refuses when a file the call changed was changed again afterwards (or
when airlock does not know what the call left): those later changes would be
lost. --force puts the files back anyway. Run it on the machine the agent ran
on, with the hook's --state-dir if its hook command sets one.

The snapshot lies in the hook's state dir, which the agent may be able to
write, so undo takes the call from the audit trail, not from the snapshot: it
acts only on a call airlock allowed or approved, in the work tree of the
working directory the call recorded, and only on the files the call named
(any file under that work tree for a shell command); it refuses a snapshot
that says otherwise, a saved copy that is a link or not what was saved, and
a call the trail shows undone already. A restored file never gets a mode
wider than it has now. A call whose request recorded no working directory is
undone only with --force, in the work tree the snapshot names.

The undo is recorded in the audit trail as an "undone" event on the call,
with who ran it (--by, default $USER, else the account this runs as);
airlock must be reachable: run it where airlock dev runs, or name its data
dir with --data.`,
		Args: exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			agent, call, ok := strings.Cut(args[0], "/")
			if !ok {
				return usageErr(cmd, "name the call as AGENT/CALL_ID (e.g. claude-code/toolu_01...), as the hook's answer and `airlock approvals list` show it")
			}
			ref, err := callref.New(agent, call, 1)
			if err != nil {
				return usageErr(cmd, "%v", err)
			}
			if by, err = operatorName(by); err != nil {
				return usageErr(cmd, "%v", err)
			}
			store, err := opts.snapshots()
			if err != nil {
				return err
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			// Connect first: an undo that cannot be recorded is not made.
			ctx := cmd.Context()
			nc, js, err := g.connect(ctx, cfg)
			if err != nil {
				return fmt.Errorf("an undo is recorded in the audit trail, but connecting to airlock's NATS failed: %w (then run it again; nothing was restored)", err)
			}
			defer nc.Close()
			rec, err := recordedCall(ctx, nc, cfg.Stream.Name, ref.Agent, ref.Call, cfg.Stream.MaxAge)
			if err != nil {
				return errors.New(escape.Terminal(err.Error()))
			}
			res, err := store.Undo(ctx, ref.Agent, ref.Call, rec, force)
			if err != nil {
				if errors.Is(err, snapshot.ErrLaterChanges) {
					return fmt.Errorf("nothing was restored: %s", escape.Terminal(err.Error()))
				}
				return errors.New(escape.Terminal(err.Error()))
			}
			body := &airlockv1.Undone{Ref: res.Ref, Forced: res.Forced, Paths: res.Paths}
			if len(body.Paths) > maxUndoneListed {
				body.More, body.Paths = uint32(len(body.Paths)-maxUndoneListed), body.Paths[:maxUndoneListed]
			}
			ev := &airlockv1.Event{
				EventId: ref.EventID(subject.Undone), AgentId: ref.Agent, CallId: ref.Call, Revision: ref.Rev,
				Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: by, Channel: "cli"},
				Body:  &airlockv1.Event_Undone{Undone: body},
			}
			if _, err := bus.NewPublisher(js, "airlock/cli").Publish(ctx, ev, ""); err != nil {
				return fmt.Errorf("the files were put back, but recording the undo failed: %w (the trail does not show it; tell whoever reviews the trail)", err)
			}
			if len(res.Paths) == 0 {
				fmt.Printf("call %s/%s changed nothing that was saved: nothing to put back (recorded as undone)\n", escape.Terminal(ref.Agent), escape.Terminal(ref.Call))
				return nil
			}
			fmt.Printf("put back %d file(s) in %s as they were before call %s/%s:\n", len(res.Paths), escape.Terminal(res.Root), escape.Terminal(ref.Agent), escape.Terminal(ref.Call))
			for _, p := range res.Paths {
				fmt.Printf("  %s\n", escape.Terminal(p))
			}
			if res.Forced {
				fmt.Println("(forced: changes made after the call to these files are gone)")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "put the files back even when they changed after the call (those changes are lost)")
	cmd.Flags().StringVar(&opts.stateDir, "state-dir", "", "the hook's state `DIR`, where its snapshots are (default as airlock hook's: $XDG_STATE_HOME/airlock/hooks)")
	cmd.Flags().StringVar(&by, "by", "", "who is undoing it, recorded as the actor (default $USER, else the account this runs as)")
	g.dataFlag(cmd)
	return cmd
}

// recordedCall is what the audit trail holds about the call: undo acts only
// within it (its working directory, the files it named), whatever the local
// manifest says, and only once. It refuses a call the trail does not hold,
// that airlock never allowed, that changes no file, or that was undone.
func recordedCall(ctx context.Context, nc *nats.Conn, stream, agent, call string, kept time.Duration) (snapshot.Call, error) {
	last := func(typ string) (*airlockv1.Event, error) {
		subj, err := subject.Event(agent, call, typ)
		if err != nil {
			return nil, err
		}
		ev, _, err := bus.LastEvent(ctx, nc, stream, subj)
		if err != nil {
			return nil, fmt.Errorf("airlock undo reads the call from the audit trail first: %w (nothing was restored; run it again once airlock answers)", err)
		}
		return ev, nil
	}
	name := agent + "/" + call
	undone, err := last(subject.Undone)
	if err != nil {
		return snapshot.Call{}, err
	}
	if undone != nil {
		return snapshot.Call{}, fmt.Errorf("call %s was undone already, by %s at %s (the audit trail's undone event): nothing was restored", name, undone.GetActor().GetId(), undone.GetTime().AsTime().UTC().Format(time.RFC3339))
	}
	req, err := last(subject.Requested)
	if err != nil {
		return snapshot.Call{}, err
	}
	if req == nil {
		return snapshot.Call{}, fmt.Errorf("the audit trail holds no call %s (the events stream keeps %s): undo puts back only what a call airlock recorded changed, so nothing was restored", name, kept)
	}
	allowed, err := last(subject.Allowed)
	if err != nil {
		return snapshot.Call{}, err
	}
	approved, err := last(subject.Approved)
	if err != nil {
		return snapshot.Call{}, err
	}
	decided := allowed
	if approved != nil {
		decided = approved
	}
	if decided == nil || decided.GetRevision() != req.GetRevision() {
		return snapshot.Call{}, fmt.Errorf("airlock never allowed call %s as the trail records it, so its hook saved nothing for it to undo: nothing was restored", name)
	}
	tc := req.GetRequested().GetCall()
	ch, ok := hooks.Event{Agent: hooks.Agent(tc.GetServer()), Server: tc.GetServer(), Tool: tc.GetTool(), Args: tc.GetArguments().AsMap()}.Changes()
	if !ok {
		return snapshot.Call{}, fmt.Errorf("call %s (%s) is not a coding agent's edit, write or shell command, so airlock's hook saved nothing for it to undo: nothing was restored", name, calls.QualifiedTool(tc))
	}
	return snapshot.Call{Cwd: tc.GetCwd(), Paths: ch.Paths, Shell: ch.Shell}, nil
}
