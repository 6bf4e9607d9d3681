package escape

import (
	"fmt"
	"iter"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// LookAlike is a name in an agent's text (a host, a path, an identifier,
// a word) that may read as a Latin name it is not: a word in it mixes
// Latin letters with letters of a script whose letters look like Latin
// ones (pаypal.com with a Cyrillic а), or a word in it is wholly of such
// letters beside Latin ones (аррӏе.com in Cyrillic before a Latin com).
// Visible shows every rune as the rune it is, but a Cyrillic а is drawn as
// an a: every surface that shows an agent's words says so beside them
// (Warning). Text in another script that does not pass for Latin — a
// Cyrillic or Japanese sentence, пример.рф, отчёт.pdf — is no LookAlike.
type LookAlike struct {
	// Text is the name as the agent wrote it: agent text, escaped for the
	// medium like any other.
	Text string
	// Kind is what Text is: "address" (it holds ://), "path" (a / or \),
	// "host" (labels joined by dots) or "name".
	Kind string
	// Scripts are the scripts of the letters that look alike, Latin first.
	Scripts []string
	// Letters are the letters of Scripts other than Latin in the words
	// that look alike, each once, in the order they first appear.
	Letters []rune
}

// Warning is the sentence a surface shows beside the value that holds l,
// the agent's text shown by esc, the medium's escape for an agent's words:
// `the host pаypal.com mixes Latin and Cyrillic letters: а (U+0430
// CYRILLIC SMALL LETTER A) looks like a`.
func (l LookAlike) Warning(esc func(string) string) string {
	var b strings.Builder
	b.WriteString(l.Summary(esc) + ": ")
	for i, r := range l.Letters {
		if i == maxWarningLetters {
			fmt.Fprintf(&b, "; and %d more", len(l.Letters)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(esc(string(r)) + " " + describeLetter(r))
	}
	return b.String()
}

// Summary is Warning without its letters, for a surface with room for one
// short line (a phone's notification): "the host pаypal.com mixes Latin
// and Cyrillic letters".
func (l LookAlike) Summary(esc func(string) string) string {
	return fmt.Sprintf("the %s %s mixes %s letters", l.Kind, esc(l.Text), andList(l.Scripts))
}

// maxWarningLetters bounds the letters a Warning describes, so that its
// length does not grow with the agent's text.
const maxWarningLetters = 3

// LookAlikes finds every LookAlike in s, each name once, in the order
// they appear. A name is a run of letters, marks, digits, runes that do
// not show as themselves (Visible escapes them) and the characters that
// join the parts of hosts, paths and identifiers (. - _ / \ : @ ~ + %);
// its words are its parts between those joiners. A name is a
// LookAlike when one of its words mixes Latin letters with letters of a
// script that passes for Latin (Cyrillic, Greek, Armenian, Cherokee,
// Coptic, Lisu, Canadian Aboriginal syllabics), or when it holds Latin
// letters and a word wholly of such letters, every one of which looks
// like a Latin letter (lookAlikeLetters): the whole-script spoof of a
// host's label or a path's segment.
func LookAlikes(s string) []LookAlike {
	var found []LookAlike
	seen := map[string]bool{}
	for name := range names(s) {
		if seen[name] {
			continue
		}
		if l, ok := lookAlike(name); ok {
			seen[name] = true
			found = append(found, l)
		}
	}
	return found
}

// latinLikeScripts are the scripts with letters drawn like Latin ones
// (Unicode's confusables for Latin come mostly from these).
var latinLikeScripts = []struct {
	name  string
	table *unicode.RangeTable
}{
	{"Cyrillic", unicode.Cyrillic},
	{"Greek", unicode.Greek},
	{"Armenian", unicode.Armenian},
	{"Cherokee", unicode.Cherokee},
	{"Coptic", unicode.Coptic},
	{"Lisu", unicode.Lisu},
	{"Canadian Aboriginal", unicode.Canadian_Aboriginal},
}

// latinLikeScript is the name of r's script when it is one of
// latinLikeScripts, else "".
func latinLikeScript(r rune) string {
	if _, ok := phoneticLookAlikes[r]; ok {
		return "phonetic Latin"
	}
	for _, s := range latinLikeScripts {
		if unicode.Is(s.table, r) {
			return s.name
		}
	}
	return ""
}

// lookAlikeLetter is a letter drawn like a Latin one: its Unicode name and
// the Latin letter it passes for.
type lookAlikeLetter struct{ name, like string }

// lookAlikeLetters are the letters of latinLikeScripts most fonts draw as
// (nearly) the Latin letter beside them, from Unicode's confusables
// (UTS #39) for the Latin alphabet; the names are Unicode's.
var lookAlikeLetters = map[rune]lookAlikeLetter{
	'а': {"CYRILLIC SMALL LETTER A", "a"}, 'е': {"CYRILLIC SMALL LETTER IE", "e"},
	'о': {"CYRILLIC SMALL LETTER O", "o"}, 'р': {"CYRILLIC SMALL LETTER ER", "p"},
	'с': {"CYRILLIC SMALL LETTER ES", "c"}, 'у': {"CYRILLIC SMALL LETTER U", "y"},
	'х': {"CYRILLIC SMALL LETTER HA", "x"}, 'ѕ': {"CYRILLIC SMALL LETTER DZE", "s"},
	'і': {"CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I", "i"}, 'ј': {"CYRILLIC SMALL LETTER JE", "j"},
	'ԁ': {"CYRILLIC SMALL LETTER KOMI DE", "d"}, 'ԛ': {"CYRILLIC SMALL LETTER QA", "q"},
	'ԝ': {"CYRILLIC SMALL LETTER WE", "w"}, 'һ': {"CYRILLIC SMALL LETTER SHHA", "h"},
	'ӏ': {"CYRILLIC SMALL LETTER PALOCHKA", "l"},
	'А': {"CYRILLIC CAPITAL LETTER A", "A"}, 'В': {"CYRILLIC CAPITAL LETTER VE", "B"},
	'Е': {"CYRILLIC CAPITAL LETTER IE", "E"}, 'К': {"CYRILLIC CAPITAL LETTER KA", "K"},
	'М': {"CYRILLIC CAPITAL LETTER EM", "M"}, 'Н': {"CYRILLIC CAPITAL LETTER EN", "H"},
	'О': {"CYRILLIC CAPITAL LETTER O", "O"}, 'Р': {"CYRILLIC CAPITAL LETTER ER", "P"},
	'С': {"CYRILLIC CAPITAL LETTER ES", "C"}, 'Т': {"CYRILLIC CAPITAL LETTER TE", "T"},
	'Х': {"CYRILLIC CAPITAL LETTER HA", "X"}, 'У': {"CYRILLIC CAPITAL LETTER U", "Y"},
	'Ѕ': {"CYRILLIC CAPITAL LETTER DZE", "S"}, 'І': {"CYRILLIC CAPITAL LETTER BYELORUSSIAN-UKRAINIAN I", "I"},
	'Ј': {"CYRILLIC CAPITAL LETTER JE", "J"}, 'Ԁ': {"CYRILLIC CAPITAL LETTER KOMI DE", "D"},
	'Ԛ': {"CYRILLIC CAPITAL LETTER QA", "Q"}, 'Ԝ': {"CYRILLIC CAPITAL LETTER WE", "W"},
	'Ү': {"CYRILLIC CAPITAL LETTER STRAIGHT U", "Y"}, 'Ӏ': {"CYRILLIC LETTER PALOCHKA", "l"},
	'α': {"GREEK SMALL LETTER ALPHA", "a"}, 'ο': {"GREEK SMALL LETTER OMICRON", "o"},
	'ν': {"GREEK SMALL LETTER NU", "v"}, 'ι': {"GREEK SMALL LETTER IOTA", "i"},
	'κ': {"GREEK SMALL LETTER KAPPA", "k"}, 'ρ': {"GREEK SMALL LETTER RHO", "p"},
	'υ': {"GREEK SMALL LETTER UPSILON", "u"},
	'Α': {"GREEK CAPITAL LETTER ALPHA", "A"}, 'Β': {"GREEK CAPITAL LETTER BETA", "B"},
	'Ε': {"GREEK CAPITAL LETTER EPSILON", "E"}, 'Ζ': {"GREEK CAPITAL LETTER ZETA", "Z"},
	'Η': {"GREEK CAPITAL LETTER ETA", "H"}, 'Ι': {"GREEK CAPITAL LETTER IOTA", "I"},
	'Κ': {"GREEK CAPITAL LETTER KAPPA", "K"}, 'Μ': {"GREEK CAPITAL LETTER MU", "M"},
	'Ν': {"GREEK CAPITAL LETTER NU", "N"}, 'Ο': {"GREEK CAPITAL LETTER OMICRON", "O"},
	'Ρ': {"GREEK CAPITAL LETTER RHO", "P"}, 'Τ': {"GREEK CAPITAL LETTER TAU", "T"},
	'Υ': {"GREEK CAPITAL LETTER UPSILON", "Y"}, 'Χ': {"GREEK CAPITAL LETTER CHI", "X"},
	'օ': {"ARMENIAN SMALL LETTER OH", "o"}, 'ս': {"ARMENIAN SMALL LETTER SEH", "u"},
	'ո': {"ARMENIAN SMALL LETTER VO", "n"}, 'հ': {"ARMENIAN SMALL LETTER HO", "h"},
	'ց': {"ARMENIAN SMALL LETTER CO", "g"}, 'զ': {"ARMENIAN SMALL LETTER ZA", "q"},
	'Ս': {"ARMENIAN CAPITAL LETTER SEH", "U"}, 'Օ': {"ARMENIAN CAPITAL LETTER OH", "O"},
	'Լ': {"ARMENIAN CAPITAL LETTER LIWN", "L"},
	'Ꭺ': {"CHEROKEE LETTER GO", "A"}, 'Ᏼ': {"CHEROKEE LETTER YV", "B"}, 'Ꮯ': {"CHEROKEE LETTER TLI", "C"},
	'Ꭰ': {"CHEROKEE LETTER A", "D"}, 'Ꭼ': {"CHEROKEE LETTER GV", "E"}, 'Ꮐ': {"CHEROKEE LETTER NAH", "G"},
	'Ꮋ': {"CHEROKEE LETTER MI", "H"}, 'Ꭵ': {"CHEROKEE LETTER V", "i"}, 'Ꭻ': {"CHEROKEE LETTER GU", "J"},
	'Ꮶ': {"CHEROKEE LETTER TSO", "K"}, 'Ꮮ': {"CHEROKEE LETTER TLE", "L"}, 'Ꮇ': {"CHEROKEE LETTER LU", "M"},
	'Ꮲ': {"CHEROKEE LETTER TLV", "P"}, 'Ꮪ': {"CHEROKEE LETTER DU", "S"}, 'Ꭲ': {"CHEROKEE LETTER I", "T"},
	'Ꮩ': {"CHEROKEE LETTER DO", "V"}, 'Ꮃ': {"CHEROKEE LETTER LA", "W"}, 'Ꮓ': {"CHEROKEE LETTER NO", "Z"},
	'ꓑ': {"LISU LETTER PA", "P"},
	'ϲ': {"GREEK LUNATE SIGMA SYMBOL", "c"}, 'Ϲ': {"GREEK CAPITAL LUNATE SIGMA SYMBOL", "C"},
	'ɑ': {"LATIN SMALL LETTER ALPHA", "a"}, 'ɡ': {"LATIN SMALL LETTER SCRIPT G", "g"}, 'ɩ': {"LATIN SMALL LETTER IOTA", "i"},
	'ᴄ': {"LATIN LETTER SMALL CAPITAL C", "c"}, 'ᴏ': {"LATIN LETTER SMALL CAPITAL O", "o"}, 'ᴠ': {"LATIN LETTER SMALL CAPITAL V", "v"},
	'ᴡ': {"LATIN LETTER SMALL CAPITAL W", "w"}, 'ᴢ': {"LATIN LETTER SMALL CAPITAL Z", "z"}, 'ʏ': {"LATIN LETTER SMALL CAPITAL Y", "y"},
}

// phoneticLookAlikes are letters of the Latin script itself (phonetic
// alphabets, small capitals) drawn like the basic Latin letter they are
// not — pɑypal.com with an alpha, ɡoogle.com with a script g — which a
// registry accepts in a host and Unicode counts as Latin. They count as a
// script of their own beside Latin; ordinary letters of Latin-written
// languages (é, ñ, ß, ı) are not among them.
var phoneticLookAlikes = map[rune]bool{'ɑ': true, 'ɡ': true, 'ɩ': true, 'ᴄ': true, 'ᴏ': true, 'ᴠ': true, 'ᴡ': true, 'ᴢ': true, 'ʏ': true}

// describeLetter is what follows a letter in a Warning: its code point,
// its name when lookAlikeLetters knows it and the Latin letter it passes
// for, else its script: "(U+0440 CYRILLIC SMALL LETTER ER) looks like p",
// "(U+0436, a Cyrillic letter)".
func describeLetter(r rune) string {
	if l, ok := lookAlikeLetters[r]; ok {
		return fmt.Sprintf("(%U %s) looks like %s", r, l.name, l.like)
	}
	return fmt.Sprintf("(%U, a %s letter)", r, latinLikeScript(r))
}

// nameJoiner reports whether r joins the parts of a host, path or
// identifier into one name.
func nameJoiner(r rune) bool { return strings.ContainsRune(`.-_/\:@~+%`, r) || lookAlikeDot(r) }

// lookAlikeDot reports whether r is drawn as a full stop, or is one that
// browsers read as the dot between a host's labels (IDNA maps the
// ideographic and fullwidth full stops to "."): аррӏе．com is one host.
func lookAlikeDot(r rune) bool { return strings.ContainsRune("。．｡․", r) }

// names yields the names in s (see LookAlikes), without a full stop or
// colon that ends a sentence or clause.
func names(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
		// A rune that does not show as itself stays in the name: a
		// zero-width space must not split pа\u200bypal into names that
		// each pass.
		inName := func(r rune) bool {
			return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || nameJoiner(r) || hidden(r) && r != '\n' && r != '\t'
		}
		for s != "" {
			start := strings.IndexFunc(s, inName)
			if start < 0 {
				return
			}
			s = s[start:]
			end := strings.IndexFunc(s, func(r rune) bool { return !inName(r) })
			if end < 0 {
				end = len(s)
			}
			name := strings.TrimRight(s[:end], ".:")
			s = s[end:]
			if name != "" && !ascii(name) && !yield(name) {
				return
			}
		}
	}
}

// ascii reports whether s is all ASCII: a name that cannot be a LookAlike,
// and most of what agents write.
func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// lookAlike judges one name (see LookAlikes).
func lookAlike(name string) (LookAlike, bool) {
	latinInName := false
	for _, r := range name {
		if unicode.Is(unicode.Latin, r) {
			latinInName = true
			break
		}
	}
	if !latinInName {
		return LookAlike{}, false
	}
	var letters []rune
	var scripts []string
	add := func(word string) {
		for _, r := range word {
			script := latinLikeScript(r)
			if script == "" || !unicode.IsLetter(r) {
				continue
			}
			if !slices.Contains(letters, r) {
				letters = append(letters, r)
			}
			if !slices.Contains(scripts, script) {
				scripts = append(scripts, script)
			}
		}
	}
	for _, w := range strings.FieldsFunc(name, nameJoiner) {
		latin, likeScripts, allLookAlike := 0, 0, true
		quantity := w != "" && unicode.IsDigit([]rune(w)[0])
		for _, r := range w {
			switch {
			case !unicode.IsLetter(r):
			case quantity && (r == 'μ' || r == 'Ω'):
				// A unit after a number (10μm, 4.7kΩ), not a spoof.
			case latinLikeScript(r) != "":
				likeScripts++
				if _, ok := lookAlikeLetters[r]; !ok {
					allLookAlike = false
				}
			case unicode.Is(unicode.Latin, r):
				latin++
				allLookAlike = false
			default:
				allLookAlike = false
			}
		}
		mixed := latin > 0 && likeScripts > 0
		spoof := latin == 0 && likeScripts > 0 && allLookAlike
		if mixed || spoof {
			add(w)
		}
	}
	if len(letters) == 0 {
		return LookAlike{}, false
	}
	return LookAlike{Text: name, Kind: nameKind(name), Scripts: append([]string{"Latin"}, scripts...), Letters: letters}, true
}

// nameKind is LookAlike.Kind of a name.
func nameKind(name string) string {
	switch {
	case strings.Contains(name, "://"):
		return "address"
	case strings.ContainsAny(name, `/\`):
		return "path"
	case strings.Contains(name, ".") || strings.IndexFunc(name, lookAlikeDot) >= 0:
		return "host"
	}
	return "name"
}

// andList joins words as a sentence does: "a", "a and b", "a, b and c".
func andList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
