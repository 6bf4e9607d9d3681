# airlock's default decision policy.
#
# Entry point: data.airlock.decision, an object with action (allow | deny |
# ask), reason, rule_id, risk, redact and, when the deciding rule names them,
# approvers, quorum, timeout, notify, escalate_to, escalate_after,
# remind_after. The policy service fills the defaults it leaves out and
# denies when the document is missing or malformed (fail closed).
#
# input.call: agent_id, call_id, revision, thread_id, on_behalf_of,
#             on_behalf_of_verified (airlock vouches for on_behalf_of), server,
#             tool, arguments, reason (the agent's own words, never trusted);
#             from the MCP gateway also annotations (the upstream's tool
#             annotations: readOnlyHint, destructiveHint, ...) and
#             annotations_trusted (true only when the registry marks the
#             upstream trusted and the gateway sealed the request).
# input.time: when the call is decided, RFC 3339 in UTC
#             ("2026-11-27T15:54:00.123456789Z"); time.now_ns() answers the
#             same instant, so `airlock policy replay` decides each recorded
#             call as of the time it was first decided.
# data.airlock.rules:    priority-ordered rules (seed 000), from data.json and
#                        the run-time rules bucket.
# data.airlock.profiles: named allow / ask / deny glob lists (seed 001).
# data.airlock.bindings: agent id -> profile name, from configuration only
#                        ("*" binds every agent without its own binding).
package airlock

# name is the qualified tool name that patterns and profiles match.
name := concat("__", [input.call.server, input.call.tool])

severity := {"allow": 0, "ask": 1, "deny": 2}

risk_rank := {"low": 1, "medium": 2, "high": 3, "critical": 4}

# Indexed by the highest rank of the matching rules; 0 (none rated) is medium.
risk_levels := ["medium", "low", "medium", "high", "critical"]

# Keys a deciding rule or profile passes through to the decision.
passthrough := ["approvers", "quorum", "timeout", "notify", "escalate_to", "escalate_after", "remind_after", "queue_per_thread"]

# ---------------------------------------------------------------- rules (seed 000)

# hits holds one entry per rule that matches the call:
#   [class, priority, index, risk rank]
# class is 0 for deny and 1 otherwise, so min(hits) is a matching deny rule
# if there is one (precedence deny > ask > allow) and else the first match
# in priority order (seed 000; ties keep the list order). index points into
# data.airlock.rules; rule_verdict(i) and redact_of(i) give the rule's part
# of the decision (action, rule_id, reason, passthrough keys) and the paths
# it masks.
#
# The policy service compiles the rules (package airlock_compiled_rules,
# with lookup tables in data.airlock_compiled): an index like OPA's rule
# index narrows them to those whose tool, server, words, glob initial or
# agent can match, and only those are checked, in Go, with the conditions
# below. Its entries carry a fifth element, the whole decision when the rule
# is the only match. Without it (opa test, opa eval) the conditions are
# evaluated here; both decide alike (a Go test checks it).
hits := data.airlock_compiled_rules.hits if {
	data.airlock_compiled_rules.ok == true
} else := {hit(r, i) |
	some i, r in rule_list
	word_matches(r.words)
	server_keys[r.server]
	tool_keys[r.tool]
	agent_keys[r.agent]
	glob.match(r.tool_glob, null, input.call.tool)
	glob.match(r.name_glob, null, name)
	every ptr, pattern in r.args {
		arg_matches(ptr, pattern, r.effect)
	}
	every ptr, pattern in r.commands {
		command_matches(ptr, pattern, r.effect)
	}
	only_named_arguments(r)
	arguments_match(r.arguments_match)
	arguments_not_matching(r.not_matching)
	arguments_matching(r.matching)
	every k, v in r.annotations {
		annotation_holds(k, v, r.effect)
	}
}

# A rule that names principals (seed 002's user allowlist) lets only calls
# acting for one of them (as airlock verified) trigger its tools: for anyone
# else it denies. Its refusal is an entry of its own, indexed after every
# rule (count(rule_list) + i), so rule_verdict and redact_of find it.
hit(r, i) := entry(r, i) if {
	principal_allowed(r.principals)
} else := [0, r.priority, count(rule_list) + i, rank_of(r)]

principal_allowed(principals) if count(principals) == 0

principal_allowed(principals) if {
	input.call.on_behalf_of_verified == true
	input.call.on_behalf_of in principals
}

entry(r, i) := [object.get({"deny": 0}, r.effect, 1), r.priority, i, rank_of(r)]

rank_of(r) := object.get(risk_rank, object.get(r, "risk", ""), 0)

# The compiled tables hold these precomputed, one entry per rule.
rule_verdict(i) := data.airlock_compiled.verdict[i] if {
	data.airlock_compiled_rules.ok == true
} else := refusal_verdict(rule_list[i - count(rule_list)]) if {
	i >= count(rule_list)
} else := object.union(object.filter(r, passthrough), {"action": r.effect, "rule_id": r.id, "reason": rule_reason(r)}) if {
	r := rule_list[i]
}

redact_of(i) := data.airlock_compiled.redact[i] if {
	data.airlock_compiled_rules.ok == true
} else := object.get(rule_list[i - count(rule_list)], "redact", []) if {
	i >= count(rule_list)
} else := object.get(rule_list[i], "redact", [])

refusal_verdict(r) := {"action": "deny", "rule_id": r.id, "reason": sprintf("only %v may trigger this tool (rule %v): this call does not act for one of them as airlock verified", [concat(", ", r.principals), r.id])}

rule_reason(r) := r.reason if {
	r.reason != ""
} else := sprintf("rule %v (priority %v) says %v", [r.id, r.priority, r.effect])

# rule_list holds the rules in normalized form: every condition present,
# "*" for any.
rule_list := [normalize(r, i) | some i, r in data.airlock.rules]

normalize(r, i) := object.union(r, {
	"id": object.get(r, "id", sprintf("#%d", [i])),
	"priority": object.get(r, "priority", 0),
	"reason": object.get(r, "reason", ""),
	"server": star(object.get(r, "server", "")),
	"tool": star(object.get(r, "tool", "")),
	"agent": star(object.get(r, "agent", "")),
	"tool_glob": star(object.get(r, "tool_pattern", "")),
	"name_glob": star(object.get(r, "pattern", "")),
	"args": object.get(r, "args", {}),
	"commands": object.get(r, "commands", {}),
	"principals": object.get(r, "principals", []),
	"other_arguments": object.get(r, "other_arguments", ""),
	"arguments_match": object.get(r, "arguments_match", ""),
	"annotations": object.get(r, "annotations", {}),
	"not_matching": object.get(r, "arguments_not_matching", {}),
	"matching": object.get(r, "arguments_matching", {}),
	"words": {w | some w in object.get(r, "tool_words", ["*"])},
})

star(s) := "*" if {
	s == ""
} else := s

server_keys := {"*", input.call.server}

tool_keys := {"*", input.call.tool}

agent_keys := {"*", input.call.agent_id}

# tool_words are the lower-case words of the tool name, split at _ - . and
# camelCase humps: "deleteFile" and "delete_file" are both delete, file
# (policy.ToolWords splits alike for the compiled rules).
tool_words := [w | some w in regex.split(`[_.\-]+`, lower(regex.replace(input.call.tool, `([a-z0-9])([A-Z])`, "${1}_${2}"))); w != ""]

# A rule without tool_words matches any tool; with them, a tool any of whose
# words is listed.
word_matches(words) if words["*"]

word_matches(words) if words[tool_words[_]]

# args maps JSON pointers to globs; every one must match a string argument.
# An allow rule's glob matches the value only as spelled, clean and not
# ending in a separator: "/tmp/" names the directory /tmp itself, which
# "/tmp/**" (any path under /tmp) does not. An ask or deny rule's glob
# matches the value as spelled or resolved lexically, and a relative path
# that climbs above its start always: "/etc/./passwd", "/tmp/../etc/passwd",
# "//etc/passwd" and "\etc\passwd" are all under "/etc/**".
arg_matches(ptr, pattern, "allow") if {
	value := object.get(input.call.arguments, pointer(ptr), null)
	is_string(value)
	clean(value)
	not regex.match(`[/\\]$`, value)
	glob.match(pattern, ["/"], value)
}

arg_matches(ptr, pattern, effect) if {
	effect != "allow"
	value := object.get(input.call.arguments, pointer(ptr), null)
	is_string(value)
	restricted_path(pattern, value)
}

restricted_path(pattern, value) if glob.match(pattern, ["/"], value)

restricted_path(pattern, value) if glob.match(pattern, ["/"], lexical(value))

restricted_path(_, value) if climbs_above_start(value)

# An allow rule whose conditions test arguments allows only the arguments
# they name (the first token of each pointer), unless it says
# other_arguments: any. So {"path": "/tmp/x", "paths": ["/etc/passwd"]} is
# not "a path under /tmp" to a rule that names /path only.
only_named_arguments(r) if r.effect != "allow"

only_named_arguments(r) if r.other_arguments == "any"

only_named_arguments(r) if count(r.args) + count(r.commands) == 0

only_named_arguments(r) if {
	r.effect == "allow"
	r.other_arguments != "any"
	named := {pointer(p)[0] | some p, _ in object.union(r.args, r.commands)}
	every k, _ in object.get(input.call, "arguments", {}) {
		k in named
	}
}

# arguments_match is a regular expression some string of the arguments, at
# any depth, must match ("" for none): how the coding profile finds a path
# to a secret, whichever argument names it.
arguments_match("") := true

arguments_match(re) if {
	re != ""
	walk(object.get(input.call, "arguments", {}), [_, value])
	is_string(value)
	regex.match(re, value)
}

# arguments_not_matching maps JSON pointers to regular expressions of the
# values those arguments may take unasked ({} for none): the rule matches
# when a string at one of them, or in a list there, is outside its
# expression; an absent argument never is. How the coding profile asks
# about a search's glob that could reach .env: only what it knows cannot.
arguments_not_matching(conds) if count(conds) == 0

arguments_not_matching(conds) if {
	some ptr, re in conds
	value := object.get(object.get(input.call, "arguments", {}), pointer(ptr), null)
	some s in strings_of(value)
	not regex.match(re, s)
}

# arguments_matching maps JSON pointers to regular expressions ({} for
# none): the rule matches when a string at one of them, or in a list there,
# matches its expression; an absent argument never does. Unlike
# arguments_match it reads only the arguments it names: how the coding
# profile asks about a write whose path names a secret, while an edit's
# content that mentions a password does not count.
arguments_matching(conds) if count(conds) == 0

arguments_matching(conds) if {
	some ptr, re in conds
	value := object.get(object.get(input.call, "arguments", {}), pointer(ptr), null)
	some s in strings_of(value)
	regex.match(re, s)
}

strings_of(v) := [v] if {
	is_string(v)
} else := [s | some s in v; is_string(s)] if {
	is_array(v)
} else := []

# annotations maps a tool annotation to the value the call's must hold. An
# ask or deny rule believes any upstream's word that its tool reaches the
# outside world; an allow rule only annotations airlock trusts.
annotation_holds(k, v, effect) if {
	effect != "allow"
	object.get(object.get(input.call, "annotations", {}), k, null) == v
}

annotation_holds(k, v, "allow") if {
	input.call.annotations_trusted == true
	object.get(object.get(input.call, "annotations", {}), k, null) == v
}

pointer(ptr) := [replace(replace(s, "~1", "/"), "~0", "~") | some s in split(trim_prefix(ptr, "/"), "/")]

# A path with "." or ".." segments never matches an allow rule's argument
# glob, so "/tmp/../etc/passwd" is not "under /tmp": such calls fall through
# to a person instead of riding on an allow rule. A backslash separates
# segments too (a tool may read it so, as the demo tools and Windows do).
clean(value) if {
	every s in regex.split(`[/\\]`, value) {
		not s in {".", ".."}
	}
}

# lexical(value) is the path as path.Clean resolves it once a backslash reads
# as "/" (calls.LexicalPath): repeated separators collapsed, "." dropped,
# ".." resolved ("/.." is "/"), no trailing separator, "" is ".". A name
# stays unless a later ".." takes it back: with weights +1 for a name and -1
# for "..", path_sums[k] is the depth after the first k segments, and a
# name is taken back where the depth first falls below the one it reached.
# (The sums also count a ".." at the root of an absolute path, which
# path.Clean drops: that changes nothing, no name being left to take back.)
lexical(value) := concat("", [root, body]) if {
	root := {true: "/", false: ""}[regex.match(`^[/\\]`, value)]
	segs := path_segments(value)
	sums := path_sums(segs)
	kept := [s |
		some i, s in segs
		s != ".."
		every k in numbers.range(i + 1, count(segs)) {
			sums[k] >= sums[i + 1]
		}
	]
	body := concat("/", kept)
	concat("", [root, body]) != ""
} else := "."

path_segments(value) := [s | some s in regex.split(`[/\\]`, value); not s in {"", "."}]

# path_sums[k] is the sum of the weights of the first k segments.
path_sums(segs) := [sum([{true: -1, false: 1}[s == ".."] | some j, s in segs; j < k]) | some k in numbers.range(0, count(segs))]

# A relative path whose ".." goes above where it starts ends wherever the
# working directory puts it: a restricting glob matches it.
climbs_above_start(value) if {
	not regex.match(`^[/\\]`, value)
	min(path_sums(path_segments(value))) < 0
}

# commands maps JSON pointers to globs on a shell command, where * also
# matches "/" and spaces. The command is split into its parts at ; & | && ||
# new lines, parentheses, backticks and $( ; an allow rule matches only when
# the command has no redirection, no backtick and no $ at all (the shell
# expands ${…}, $'…' and $((…)) into commands it then runs), no quote,
# backslash or brace (the shell removes quotes and escapes and expands
# braces, so `git diff "--output=F"` reaches git as --output=F), no shell
# pattern (* ? [ expand to file names the policy never sees: cat .e* reads
# .env), no option
# that makes a reading command run or write something (rg --pre, git diff
# --output, --ext-diff, --textconv, git difftool --extcmd, …), and every
# part matches (so "git status *" never allows "git status; rm -rf ~"); an
# ask or deny rule when
# any part matches, quotes and backslashes removed first (so "rm -rf *" also
# catches "cd x && rm -rf ~" and r""m -rf ~).
command_matches(ptr, pattern, "allow") if {
	value := object.get(input.call.arguments, pointer(ptr), null)
	is_string(value)
	not regex.match(`[<>\x60$'"\\{*?[]`, value)
	not regex.match(`(^|\s)--?(pre|output|ext-diff|textconv|exec|extcmd|tool|gui|hostname-bin|upload-pack|receive-pack|open-files-in-pager)\b`, value)
	parts := command_parts(value)
	count(parts) > 0
	every p in parts {
		glob.match(pattern, null, p)
	}
}

command_matches(ptr, pattern, effect) if {
	effect != "allow"
	value := object.get(input.call.arguments, pointer(ptr), null)
	is_string(value)
	some p in command_parts(regex.replace(value, `["'\\]`, ""))
	glob.match(pattern, null, p)
}

command_parts(cmd) := [p |
	some s in regex.split(`&&|\|\||\$\(|[;&|\n()\x60]`, cmd)
	p := regex.replace(trim_space(s), `\s+`, " ")
	p != ""
]

rules_verdict := rule_verdict(min(hits)[2])

# ---------------------------------------------------------------- profiles (seed 001)

# The binding comes from configuration (data.airlock.bindings), never from
# anything the agent sends.
profile_name := p if {
	p := data.airlock.bindings[input.call.agent_id]
} else := data.airlock.bindings["*"]

# Most agents have no profile: profile_name is then undefined and nothing
# below is evaluated.
profile_verdict := profile_decide(pn) if pn := profile_name

profile_decide(pn) := {"action": "deny", "rule_id": concat(":", ["profile", pn]), "reason": sprintf("agent %s is bound to profile %q, which the policy does not define: fix policy.profiles or the profile data", [input.call.agent_id, pn])} if {
	not data.airlock.profiles[pn]
} else := object.union(object.filter(p, passthrough), {"action": "deny", "rule_id": concat(":", ["profile", pn]), "reason": sprintf("profile %q denies %s (matches %q)", [pn, name, m[0]])}) if {
	p := data.airlock.profiles[pn]
	m := profile_matches(p, "deny")
	count(m) > 0
} else := object.union(object.filter(p, passthrough), {"action": "ask", "rule_id": concat(":", ["profile", pn]), "reason": sprintf("profile %q asks a person about %s (matches %q)", [pn, name, m[0]])}) if {
	p := data.airlock.profiles[pn]
	m := profile_matches(p, "ask")
	count(m) > 0
} else := object.union(object.filter(p, passthrough), {"action": "allow", "rule_id": concat(":", ["profile", pn]), "reason": sprintf("profile %q allows %s (matches %q)", [pn, name, m[0]])}) if {
	p := data.airlock.profiles[pn]
	m := profile_matches(p, "allow")
	count(m) > 0
} else := {"action": "deny", "rule_id": concat(":", ["profile", pn]), "reason": sprintf("profile %q allows only its allow list, and %s is not on it", [pn, name])} if {
	p := data.airlock.profiles[pn]
	count(object.get(p, "allow", [])) > 0
}

profile_matches(p, list) := [g | some g in object.get(p, list, []); glob.match(g, null, name)]

# ---------------------------------------------------------------- decision

# The stricter of the rules' and the profile's verdicts wins; on a tie the
# rule decides (it carries approvers and the like). Nothing matching asks.
verdict := profile_verdict if {
	severity[profile_verdict.action] > severity[rules_verdict.action]
} else := rules_verdict if {
	rules_verdict
} else := profile_verdict if {
	profile_verdict
} else := {"action": "ask", "rule_id": "", "reason": sprintf("no rule matches %s: a person decides", [name])}

# risk is the highest any matching rule assigns: a property of the call,
# whichever rule decides. Calls no rule rates are medium.
risk := r if {
	r := risk_levels[max({h[3] | some h in hits})]
} else := "medium"

# redact collects the argument paths every matching rule masks.
redact := {p | some h in hits; some p in redact_of(h[2])}

# The common case, an agent without a profile whose call some rule matches,
# is decided in one step by airlock's compiled rules
# (data.airlock_compiled_rules.decision: exactly what general gives then, the
# matching done in Go by the policy service). Without them (opa test, opa
# eval) general decides every call alike.
decision := d if {
	d := data.airlock_compiled_rules.decision
} else := general

general := object.union(verdict, {"risk": risk, "redact": redact})
