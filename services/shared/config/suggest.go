package config

// Suggest tunes `airlock policy suggest` and the console's Suggestions page:
// when a group of one agent's calls that people kept approving becomes a
// proposed standing grant. Zero values take the defaults.
type Suggest struct {
	// MinApprovals: approvals a group needs (default 5).
	MinApprovals int `yaml:"min_approvals"`
	// MinApprovers: distinct people among them (default 2); a requester
	// confirming their own calls under self-confirmation counts alone.
	MinApprovers int `yaml:"min_approvers"`
	// AllowRisks: risks beyond low and medium that may be proposed
	// ("high", "critical"); none by default.
	AllowRisks []string `yaml:"allow_risks"`
	// MinPathDepth: directories a directory must have before approved
	// paths in it are widened to its files (default 2: /srv/app/[!./]*,
	// never /home/[!./]*).
	MinPathDepth int `yaml:"min_path_depth"`
	// MinPathsPerDirectory: distinct approved paths a directory must
	// directly hold before the proposed grant allows its other files
	// (default 3); never a name starting with ".", nothing deeper, and
	// other approved paths only exactly.
	MinPathsPerDirectory int `yaml:"min_paths_per_directory"`
	// Since: how far back the evidence is read, e.g. 720h (default: all
	// of it). The proof replays the whole trail whatever the window.
	Since string `yaml:"since"`
}
