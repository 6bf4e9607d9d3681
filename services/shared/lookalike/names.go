package lookalike

import (
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/airlock-gate/airlock/services/shared/escape"
	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
	"golang.org/x/text/unicode/norm"
)

// Name is a name in an agent's text (a host, a path, an identifier,
// a word) that may read as a Latin name it is not: a word in it mixes
// Latin letters with letters of a script whose letters look like Latin
// ones (pаypal.com with a Cyrillic а), with digits of another script
// (g൦൦gle.com with Malayalam zeros) or with styled letters (𝐩𝐚𝐲𝐩𝐚𝐥.com,
// ｐａｙｐａｌ), or a word or the whole name is wholly of such look-alikes
// (аррӏе.com, аррӏе.со). Visible shows every rune as the rune it is, but a
// Cyrillic а is drawn as an a: every surface that shows an agent's words
// says so beside them (Warning). Text in another script that does not pass
// for Latin — a Cyrillic or Japanese sentence, пример.рф, отчёт.pdf — is no
// Name. An address or host, ASCII or not, that reads as leading to a
// domain it does not lead to (https://paypal.com@evil.example/,
// accounts.google.com.evil.example) is one too: its warning names where
// it leads.
type Name struct {
	// Text is the name as the agent wrote it: agent text, escaped for the
	// medium like any other.
	Text string
	// Kind is what Text is: "address" (it holds ://), "path" (a / or \),
	// "e-mail address" (an @), "host" (labels joined by dots) or "name".
	Kind string
	// Scripts are the scripts of the letters that pass for Latin ones
	// ("Cyrillic", "phonetic Latin"), after "Latin" when Text holds Latin
	// letters.
	Scripts []string
	// Digits are the runs of the look-alike digits of other scripts
	// ("Malayalam", "Fullwidth"), after "ASCII" when Text holds ASCII
	// digits but no Latin letters.
	Digits []string
	// Styled reports styled letters among the look-alikes (𝐩, ｐ, ⓟ, ℓ).
	Styled bool
	// Punctuation reports characters drawn as the ASCII punctuation of
	// addresses and paths that are not it (∕ U+2215 for /).
	Punctuation bool
	// Marks reports combining marks that do not compose with the Latin
	// letter they follow (NFC): ı with a combining dot above is drawn as
	// an i.
	Marks bool
	// Characters are the look-alike letters and digits of the words that
	// look alike, each once, in the order they first appear.
	Characters []rune
	// ASCII is the ASCII form (IDNA, punycode) of the host Text names when
	// Text is a host, an e-mail address or an address and that host is not
	// ASCII: the name a resolver is asked for. Else "".
	ASCII string
	// UserInfo is what an address holds before the @ of its host when that
	// reads as a domain (https://paypal.com@evil.example/login:
	// "paypal.com"), and Host the host the address connects to
	// ("evil.example"); else both "". (From h-lookalike4.)
	UserInfo, Host string
	// Embedded is the domain that labels in front of a host's registrable
	// domain read as (accounts.google.com.evil.example: "google.com"), and
	// Domain that registrable domain, whose owner owns the host
	// ("evil.example"); else both "" (embeddedDomain).
	Embedded, Domain string
}

// Warning is the sentence a surface shows beside the value that holds l,
// the agent's text shown by esc, the medium's escape for an agent's words:
// `the host pаypal.com mixes Latin and Cyrillic letters: а (U+0430
// CYRILLIC SMALL LETTER A) looks like a; in ASCII its host is
// xn--pypal-4ve.com`.
func (l Name) Warning(esc func(string) string) string {
	var b strings.Builder
	b.WriteString(l.Summary(esc))
	if len(l.Characters) > 0 {
		b.WriteString(": ")
	}
	for i, r := range l.Characters {
		if i == maxWarningLetters {
			fmt.Fprintf(&b, "; and %d more", len(l.Characters)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(esc(string(r)) + " " + describeLetter(r))
	}
	if l.ASCII != "" {
		b.WriteString("; in ASCII its host is " + esc(l.ASCII))
	}
	leads := l.leadsTo(esc)
	if len(l.Characters) == 0 && len(leads) > 0 {
		leads = leads[1:] // the Summary's
	}
	for _, s := range leads {
		b.WriteString("; it " + s)
	}
	return b.String()
}

// leadsTo is what a Warning says of where a name with a UserInfo or an
// Embedded domain leads: "leads to the host evil.example: paypal.com
// before the @ is a user name", "leads to the domain evil.example, not
// google.com".
func (l Name) leadsTo(esc func(string) string) []string {
	var says []string
	if l.UserInfo != "" {
		says = append(says, fmt.Sprintf("leads to the host %s: %s before the @ is a user name", esc(l.Host), esc(l.UserInfo)))
	}
	if l.Embedded != "" {
		says = append(says, fmt.Sprintf("leads to the domain %s, not %s", esc(l.Domain), esc(l.Embedded)))
	}
	return says
}

// Summary is Warning without its letters, for a surface with room for one
// short line (a phone's notification): "the host pаypal.com mixes Latin
// and Cyrillic letters", "the host аррӏе.со is written in Cyrillic letters
// that pass for Latin"; for a name with no look-alike character, where it
// leads: "the address https://accounts.google.com.evil.example/ leads to
// the domain evil.example, not google.com".
func (l Name) Summary(esc func(string) string) string {
	if leads := l.leadsTo(esc); len(l.Characters) == 0 && len(leads) > 0 {
		return fmt.Sprintf("the %s %s %s", l.Kind, esc(l.Text), leads[0])
	}
	var groups []string
	if len(l.Scripts) > 0 {
		groups = append(groups, andList(l.Scripts)+" letters")
	}
	if len(l.Digits) > 0 {
		groups = append(groups, andList(l.Digits)+" digits")
	}
	if l.Styled {
		groups = append(groups, "styled letters")
	}
	if l.Punctuation {
		groups = append(groups, "punctuation that is not ASCII")
	}
	if l.Marks {
		groups = append(groups, "combining marks")
	}
	if len(l.Scripts) > 0 && l.Scripts[0] == "Latin" || len(l.Digits) > 0 && l.Digits[0] == "ASCII" {
		return fmt.Sprintf("the %s %s mixes %s", l.Kind, esc(l.Text), andList(groups))
	}
	return fmt.Sprintf("the %s %s is written in %s that pass for Latin", l.Kind, esc(l.Text), andList(groups))
}

// maxWarningLetters bounds the letters a Warning describes, so that its
// length does not grow with the agent's text.
const maxWarningLetters = 3

// LookAlikes finds every Name in s, each name once, in the order
// they appear. A name is a run of letters, marks, digits, styled letters,
// runes that do not show as themselves (Visible escapes them) and the
// characters that join the parts of hosts, paths and identifiers
// (. - _ / \ : @ ~ + %); its words are its parts between those joiners.
// A name is a Name when one of its words
//
//   - mixes Latin letters with letters of a script that passes for Latin
//     (Cyrillic, Greek, Armenian, Cherokee, Coptic, Lisu, Canadian
//     Aboriginal syllabics, phonetic Latin), with digits of another script
//     (any decimal digit outside ASCII: g൦൦gle), or with styled letters
//     (p𝐚ypal); or mixes ASCII digits with other digits (1٠0);
//   - holds styled letters that pass for Latin ones and is no single
//     letter (𝚐𝚘𝚘𝚐𝚕𝚎; a lone 𝑥 is mathematics), unless they are fullwidth
//     letters or Roman numerals beside Chinese, Japanese or Korean letters
//     (ＰＤＦファイル is ordinary typography there);
//   - is wholly of look-alikes (every letter and digit passes for Latin:
//     lookAlikeLetters, digitTwins, styled letters) while the name holds
//     Latin letters elsewhere: аррӏе.com, the whole-script spoof of a
//     host's label or a path's segment;
//
// or when the name holds no Latin letter at all but every letter and digit
// in it passes for a Latin one and it is shaped as a host or identifier
// (hostOrIdentifier: also a path, an option or an address of such words,
// /ԁеν/ѕԁа, ѕһеӏӏ-ехес), or when one of its words is wholly of look-alikes
// of two scripts or more (ѕսԁо): аррӏе.со, аррӏе@со.со, ѕсоре_ехес. A sentence or a
// word of Russian or Greek holds letters that do not pass for Latin, and is
// not joined by dots and underscores as hosts and identifiers are; a real
// Cyrillic or Greek domain (пример.рф, яндекс.рф, παράδειγμα.δοκιμή) holds
// such letters too. A Cyrillic domain made only of letters that pass for
// Latin is flagged: to a reviewer it reads as the Latin name it looks like,
// which is what the warning says.
//
// A name with Latin letters that holds punctuation drawn as a path's, an
// address's or a host's and is not it (https://paypal.com∕login.evil.com,
// a division slash: the host asked for is not paypal.com) is a Name
// too (lookAlikePunctuation).
//
// A μ, Ω or ℓ in a quantity's unit (10μm, 4.7kΩ, 10 μF, 2ℓ) is no
// look-alike: after a number, at most one letter (an SI prefix) before it
// and two after it (unit).
//
// A name in ASCII alone is a Name when it reads as leading to a host
// it does not lead to: an address whose user-info before its last @ holds
// a domain, whatever punctuation surrounds it
// (https://paypal.com@evil.example/login and
// https://paypal.com&x@evil.example/ connect to evil.example; also
// without a scheme, paypal.com@evil.example/login; userInfo), or a host —
// of an address, an e-mail address or on its own — whose labels in front
// of its registrable domain read as a domain of their own
// (accounts.google.com.evil.example, paypal.com-login.ru,
// ghcr.io.evil.com, paypal.com%2eevil.ru: embeddedDomain). Its warning
// has a heading of its own (Name.Heading).
func Find(s string) []Name {
	var found []Name
	seen := map[string]bool{}
	for name, afterNumber := range names(s) {
		// Every name judged is remembered, flagged or not: an agent's text
		// may repeat a name thousands of times, and the ASCII rules ask the
		// public suffix list (R10 F5).
		if seen[name] {
			continue
		}
		seen[name] = true
		if l, ok := lookAlike(name, afterNumber); ok {
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
	// R8's: letters missing above turned a whole-label spoof off (үаһоо.com,
	// ꓚꓲꓢꓚꓳ.com, ⲣⲟⲣ.com, ꭰꭺꮯ.com, ᗷᗩᑎᏦ.com) or passed in a Latin word (paypaǀ.com).
	'ǀ': {"LATIN LETTER DENTAL CLICK", "l"}, 'ʟ': {"LATIN LETTER SMALL CAPITAL L", "L"}, 'ɪ': {"LATIN LETTER SMALL CAPITAL I", "I"},
	'ᴀ': {"LATIN LETTER SMALL CAPITAL A", "A"}, 'ȷ': {"LATIN SMALL LETTER DOTLESS J", "j"}, 'Ɩ': {"LATIN CAPITAL LETTER IOTA", "l"},
	'ꜱ': {"LATIN LETTER SMALL CAPITAL S", "s"}, 'ɢ': {"LATIN LETTER SMALL CAPITAL G", "G"}, 'ʜ': {"LATIN LETTER SMALL CAPITAL H", "H"},
	'ᴍ': {"LATIN LETTER SMALL CAPITAL M", "M"}, 'ƒ': {"LATIN SMALL LETTER F WITH HOOK", "f"},
	'ү': {"CYRILLIC SMALL LETTER STRAIGHT U", "y"}, 'ѵ': {"CYRILLIC SMALL LETTER IZHITSA", "v"}, 'γ': {"GREEK SMALL LETTER GAMMA", "y"},
	'ω': {"GREEK SMALL LETTER OMEGA", "w"}, 'ꓚ': {"LISU LETTER CA", "C"}, 'ꓲ': {"LISU LETTER I", "I"},
	'ꓢ': {"LISU LETTER SA", "S"}, 'ꓳ': {"LISU LETTER O", "O"}, 'ꓐ': {"LISU LETTER BA", "B"},
	'ꓓ': {"LISU LETTER DA", "D"}, 'ꓔ': {"LISU LETTER TA", "T"}, 'ꓖ': {"LISU LETTER GA", "G"},
	'ꓗ': {"LISU LETTER KA", "K"}, 'ꓡ': {"LISU LETTER LA", "L"}, 'ꓟ': {"LISU LETTER MA", "M"},
	'ꓠ': {"LISU LETTER NA", "N"}, 'ꓣ': {"LISU LETTER ZHA", "R"}, 'ꓦ': {"LISU LETTER HA", "V"},
	'ꓪ': {"LISU LETTER WA", "W"}, 'ꓫ': {"LISU LETTER SHA", "X"}, 'ꓬ': {"LISU LETTER YA", "Y"},
	'ꓜ': {"LISU LETTER DZA", "Z"}, 'ꓮ': {"LISU LETTER A", "A"}, 'ꓰ': {"LISU LETTER E", "E"},
	'ꓝ': {"LISU LETTER TSA", "F"}, 'ꓧ': {"LISU LETTER XA", "H"}, 'ꓙ': {"LISU LETTER JA", "J"},
	'ⲣ': {"COPTIC SMALL LETTER RO", "p"}, 'ⲟ': {"COPTIC SMALL LETTER O", "o"}, 'ⲥ': {"COPTIC SMALL LETTER SIMA", "c"},
	'ⲭ': {"COPTIC SMALL LETTER KHI", "x"}, 'Ⲟ': {"COPTIC CAPITAL LETTER O", "O"}, 'Ⲣ': {"COPTIC CAPITAL LETTER RO", "P"},
	'Ⲥ': {"COPTIC CAPITAL LETTER SIMA", "C"}, 'Ⲭ': {"COPTIC CAPITAL LETTER KHI", "X"}, 'Ⲁ': {"COPTIC CAPITAL LETTER ALFA", "A"},
	'Ⲃ': {"COPTIC CAPITAL LETTER VIDA", "B"}, 'Ⲉ': {"COPTIC CAPITAL LETTER EIE", "E"}, 'Ⲏ': {"COPTIC CAPITAL LETTER HATE", "H"},
	'Ⲓ': {"COPTIC CAPITAL LETTER IAUDA", "I"}, 'Ⲕ': {"COPTIC CAPITAL LETTER KAPA", "K"}, 'Ⲙ': {"COPTIC CAPITAL LETTER MI", "M"},
	'Ⲛ': {"COPTIC CAPITAL LETTER NI", "N"}, 'Ⲧ': {"COPTIC CAPITAL LETTER TAU", "T"}, 'Ⲩ': {"COPTIC CAPITAL LETTER UA", "Y"},
	'ꭰ': {"CHEROKEE SMALL LETTER A", "D"}, 'ꭺ': {"CHEROKEE SMALL LETTER GO", "A"}, 'ꮯ': {"CHEROKEE SMALL LETTER TLI", "C"},
	'ꮃ': {"CHEROKEE SMALL LETTER LA", "W"}, 'ꮪ': {"CHEROKEE SMALL LETTER DU", "S"}, 'ꮇ': {"CHEROKEE SMALL LETTER LU", "M"},
	'ꮋ': {"CHEROKEE SMALL LETTER MI", "H"}, 'ꭼ': {"CHEROKEE SMALL LETTER GV", "E"}, 'ꮐ': {"CHEROKEE SMALL LETTER NAH", "G"},
	'ꮶ': {"CHEROKEE SMALL LETTER TSO", "K"}, 'ꮮ': {"CHEROKEE SMALL LETTER TLE", "L"}, 'ꮲ': {"CHEROKEE SMALL LETTER TLV", "P"},
	'ꭲ': {"CHEROKEE SMALL LETTER I", "T"}, 'ꮩ': {"CHEROKEE SMALL LETTER DO", "V"}, 'ꮓ': {"CHEROKEE SMALL LETTER NO", "Z"},
	'ꭻ': {"CHEROKEE SMALL LETTER GU", "J"}, 'ꭵ': {"CHEROKEE SMALL LETTER V", "i"}, 'ᗷ': {"CANADIAN SYLLABICS CARRIER KHE", "B"},
	'ᗩ': {"CANADIAN SYLLABICS CARRIER PO", "A"}, 'ᑎ': {"CANADIAN SYLLABICS TI", "n"}, 'ᑕ': {"CANADIAN SYLLABICS TA", "C"},
	'ᗪ': {"CANADIAN SYLLABICS CARRIER PE", "D"}, 'ᕼ': {"CANADIAN SYLLABICS NUNAVUT H", "H"}, 'ᒪ': {"CANADIAN SYLLABICS MA", "L"},
	'ᗰ': {"CANADIAN SYLLABICS CARRIER GO", "M"}, 'ᑭ': {"CANADIAN SYLLABICS KI", "P"}, 'ᔕ': {"CANADIAN SYLLABICS SHA", "S"},
	'ᐯ': {"CANADIAN SYLLABICS PE", "V"}, 'ᗯ': {"CANADIAN SYLLABICS CARRIER GU", "W"}, 'ᒍ': {"CANADIAN SYLLABICS CO", "J"},
	'ᑌ': {"CANADIAN SYLLABICS TE", "U"},
}

// phoneticLookAlikes are letters of the Latin script itself (phonetic
// alphabets, small capitals) drawn like the basic Latin letter they are
// not — pɑypal.com with an alpha, ɡoogle.com with a script g — which a
// registry accepts in a host and Unicode counts as Latin. They count as a
// script of their own beside Latin; ordinary letters of Latin-written
// languages (é, ñ, ß, ı) are not among them.
var phoneticLookAlikes = map[rune]bool{'ɑ': true, 'ɡ': true, 'ɩ': true, 'ᴄ': true, 'ᴏ': true, 'ᴠ': true, 'ᴡ': true, 'ᴢ': true, 'ʏ': true,
	'ǀ': true, 'ʟ': true, 'ɪ': true, 'ᴀ': true, 'ȷ': true, 'Ɩ': true, 'ꜱ': true, 'ɢ': true, 'ʜ': true, 'ᴍ': true, 'ƒ': true}

// describeLetter is what follows a look-alike in a Warning: its code
// point, its Unicode name when known and what it passes for, else its
// script: "(U+0440 CYRILLIC SMALL LETTER ER) looks like p", "(U+1D429
// MATHEMATICAL BOLD SMALL P), a styled letter, passes for p", "(U+0D66
// MALAYALAM DIGIT ZERO) looks like o", "(U+0967 DEVANAGARI DIGIT ONE), a
// digit 1", "(U+0436, a Cyrillic letter)".
func describeLetter(r rune) string {
	if l, ok := lookAlikeLetters[r]; ok {
		return fmt.Sprintf("(%U %s) looks like %s", r, l.name, l.like)
	}
	if s, ok := styled(r); ok {
		return fmt.Sprintf("(%U %s), a styled letter, passes for %s", r, s.name, s.like)
	}
	if d, ok := digitOf(r); ok {
		switch {
		case d.name != "" && d.like != "":
			return fmt.Sprintf("(%U %s) looks like %s", r, d.name, d.like)
		case d.name != "":
			return fmt.Sprintf("(%U %s), a digit %d", r, d.name, d.value)
		}
		return fmt.Sprintf("(%U, a digit %d)", r, d.value)
	}
	if p, ok := lookAlikePunctuation[r]; ok {
		return fmt.Sprintf("(%U %s) looks like %s", r, p.name, p.like)
	}
	if unicode.Is(unicode.Mn, r) {
		return fmt.Sprintf("(%U), a combining mark that forms no letter with the one before it", r)
	}
	if name, ok := unitSignNames[r]; ok {
		return fmt.Sprintf("(%U %s), a Greek letter, is no unit here", r, name)
	}
	return fmt.Sprintf("(%U, a %s letter)", r, latinLikeScript(r))
}

// unitSignNames are the Unicode names of the runes unitSign accepts.
var unitSignNames = map[rune]string{
	'μ': "GREEK SMALL LETTER MU", '\u00b5': "MICRO SIGN", 'Ω': "GREEK CAPITAL LETTER OMEGA", '\u2126': "OHM SIGN",
}

// nameJoiner reports whether r joins the parts of a host, path or
// identifier into one name.
func nameJoiner(r rune) bool {
	if strings.ContainsRune(`.-_/\:@~+%`, r) || lookAlikeDot(r) {
		return true
	}
	_, ok := lookAlikePunctuation[r]
	return ok
}

// lookAlikePunctuation are characters drawn as the ASCII punctuation that
// shapes addresses and paths, and are not it: in
// https://paypal.com∕login.evil.com the division slash ends no host, and
// the host a browser asks for is not paypal.com. They join a name as what
// they pass for would, so the name is judged whole.
var lookAlikePunctuation = map[rune]struct{ name, like string }{
	'∕': {"DIVISION SLASH", "/"},
	'⁄': {"FRACTION SLASH", "/"},
	'⧸': {"BIG SOLIDUS", "/"},
	'⟋': {"MATHEMATICAL RISING DIAGONAL", "/"},
	'╱': {"BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT", "/"},
	'／': {"FULLWIDTH SOLIDUS", "/"},
	'∖': {"SET MINUS", `\`},
	'⧵': {"REVERSE SOLIDUS OPERATOR", `\`},
	'⧹': {"BIG REVERSE SOLIDUS", `\`},
	'＼': {"FULLWIDTH REVERSE SOLIDUS", `\`},
	'∶': {"RATIO", ":"},
	'꞉': {"MODIFIER LETTER COLON", ":"},
	'＠': {"FULLWIDTH COMMERCIAL AT", "@"},
	'﹫': {"SMALL COMMERCIAL AT", "@"},
}

// lookAlikeDot reports whether r is drawn as a full stop, or is one that
// browsers read as the dot between a host's labels (IDNA maps the
// ideographic and fullwidth full stops to "."): аррӏе．com is one host.
func lookAlikeDot(r rune) bool {
	// No ASCII rune is among them, and most runes judged are ASCII.
	return r >= utf8.RuneSelf && strings.ContainsRune(lookAlikeDots, r)
}

// lookAlikeDots: the ideographic, fullwidth, halfwidth ideographic and
// one-dot-leader full stops, and the marks drawn as a full stop or a raised
// one between two labels (R8: аррӏе﹒com with a small full stop) —
// hyphenation point, middle dot, small full stop, Syriac sublinear, Vai,
// Arabic full stops, word separator middle dot, Kharoshthi dot.
const lookAlikeDots = "。．｡․\u2027\u00b7\ufe52\u0702\ua60e\u06d4\u2e31\U00010a50"

// names yields the names in s (see LookAlikes), without a full stop or
// colon that ends a sentence or clause, each with whether it follows a
// number and one space (the unit of 10 μm).
func names(s string) iter.Seq2[string, bool] {
	return func(yield func(string, bool) bool) {
		// A rune that does not show as itself stays in the name: a
		// zero-width space must not split pа\u200bypal into names that
		// each pass. So does a styled letter that is no letter to Unicode
		// (ⓟ is a symbol, ⅼ a number).
		inName := func(r rune) bool {
			if unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || nameJoiner(r) {
				return true
			}
			if _, ok := styled(r); ok {
				return true
			}
			return escape.Hidden(r) && r != '\n' && r != '\t'
		}
		for i := 0; i < len(s); {
			start := strings.IndexFunc(s[i:], inName)
			if start < 0 {
				return
			}
			start += i
			end := strings.IndexFunc(s[start:], func(r rune) bool { return !inName(r) })
			if end < 0 {
				end = len(s)
			} else {
				end += start
			}
			end = addressEnd(s, start, end, inName)
			i = end
			for k, part := range splitAtCJKStops(s[start:end]) {
				name := strings.TrimRight(part, ".:")
				// An ASCII name is judged only for where it leads, which
				// takes a dot (a host's, or a domain's before an @).
				candidate := !ascii(name) || strings.Contains(name, ".")
				if name != "" && candidate && !yield(name, k == 0 && followsNumber(s[:start])) {
					return
				}
			}
		}
	}
}

// userInfoPunctuation are the characters a URL's user name may hold
// (RFC 3986's sub-delims, and the brackets of an IPv6 host after it) that
// end a name in prose.
const userInfoPunctuation = "!$&*,;=[]"

// addressEnd is where the name s[start:end] ends when it is an address
// whose authority runs on through userInfoPunctuation to an @: a client
// connects to the host after that @, so the name is the whole address
// (https://paypal.com&login@evil.ru/, https://paypal.com@[2001:db8::1]/;
// R10 F1). Else end.
func addressEnd(s string, start, end int, inName func(rune) bool) int {
	scheme := strings.Index(s[start:end], "://")
	if scheme < 0 || end >= len(s) || strings.IndexByte(userInfoPunctuation, s[end]) < 0 ||
		strings.ContainsAny(s[start+scheme+3:end], "/?#") {
		return end
	}
	j := end
	for j < len(s) {
		r, size := utf8.DecodeRuneInString(s[j:])
		if r == '/' || !(inName(r) || strings.ContainsRune(userInfoPunctuation, r)) {
			break
		}
		j += size
	}
	if !strings.Contains(s[start+scheme+3:j], "@") {
		return end
	}
	// The path after the host is the name's as before.
	if rest := strings.IndexFunc(s[j:], func(r rune) bool { return !inName(r) }); rest < 0 {
		return len(s)
	} else {
		return j + rest
	}
}

// splitAtCJKStops splits name at each full stop other than "." that has a
// Chinese, Japanese or Korean letter beside it: there it ends a sentence
// (会議は１０月１日です。ＰＣ is two), where between Latin or look-alike labels
// it is a host's dot (аррӏе．com).
func splitAtCJKStops(name string) []string {
	var parts []string
	start := 0
	var prev rune
	for i, r := range name {
		if r != '.' && lookAlikeDot(r) {
			next, _ := utf8.DecodeRuneInString(name[i+utf8.RuneLen(r):])
			if cjk(prev) || cjk(next) {
				parts = append(parts, name[start:i])
				start = i + utf8.RuneLen(r)
			}
		}
		prev = r
	}
	return append(parts, name[start:])
}

// followsNumber reports whether before, the text before a name, ends with
// an ASCII digit and one space (a no-break one too): 10 μm.
func followsNumber(before string) bool {
	r, size := utf8.DecodeLastRuneInString(before)
	if r != ' ' && r != '\u00a0' && r != '\u202f' {
		return false
	}
	before = before[:len(before)-size]
	return before != "" && before[len(before)-1] >= '0' && before[len(before)-1] <= '9'
}

// ascii reports whether s is all ASCII: a name that cannot be a Name,
// and most of what agents write.
func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// plainLatin reports whether r is a Latin letter that is none of the
// look-alikes: not phonetic (ɑ), not styled (ｐ, K).
func plainLatin(r rune) bool {
	if !unicode.Is(unicode.Latin, r) || !unicode.IsLetter(r) || phoneticLookAlikes[r] {
		return false
	}
	_, isStyled := styled(r)
	return !isStyled
}

// cjk reports whether r is a Chinese, Japanese or Korean letter.
func cjk(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// lookAlikeRune is how one rune of a word counts (lookAlike): script is
// its script among latinLikeScripts, styled whether it is a styled letter,
// digit whether it is a digit outside ASCII; passes whether it passes for
// a Latin letter or digit.
type lookAlikeRune struct {
	script         string
	styled, digit  bool
	passes, letter bool
}

// classify is how r counts in a word; ok is false for a rune that is no
// look-alike (a plain Latin letter, an ASCII digit, a letter of a script
// that does not pass for Latin, a joiner, a mark).
func classify(r rune) (lookAlikeRune, bool) {
	if s, ok := styled(r); ok {
		return lookAlikeRune{styled: true, passes: passesForLatin(s.like), letter: true}, true
	}
	if d, ok := digitOf(r); ok {
		return lookAlikeRune{digit: true, passes: d.like != ""}, true
	}
	if _, ok := unitSignNames[r]; ok {
		return lookAlikeRune{script: "Greek", letter: true}, true // the micro sign is a Greek mu too (NFKC)
	}
	if script := latinLikeScript(r); script != "" && unicode.IsLetter(r) {
		_, twin := lookAlikeLetters[r]
		return lookAlikeRune{script: script, passes: twin, letter: true}, true
	}
	return lookAlikeRune{}, false
}

// unitSign reports whether r is a μ or Ω, which a unit holds (μm, kΩ): the
// Greek letters, the micro sign and the ohm sign; or ℓ, the litre (2ℓ,
// mℓ), a styled letter elsewhere.
func unitSign(r rune) bool {
	return r == 'μ' || r == '\u00b5' || r == 'Ω' || r == '\u2126' || r == 'ℓ'
}

// unit reports whether w, a word, is a quantity's unit with a μ or Ω in
// it: after digits it starts with, or right after a number (afterNumber),
// at most one ASCII letter (an SI prefix: kΩ), a μ or Ω, then at most two
// ASCII letters or signs (μm, μF, μΩ). 10μicrosoft and 3Ωpen are none.
func unit(w string, afterNumber bool) bool {
	rest := []rune(strings.TrimLeft(w, "0123456789"))
	if len(rest) == utf8.RuneCountInString(w) && !afterNumber {
		return false
	}
	asciiLetter := func(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }
	i := 0
	if len(rest) > 1 && asciiLetter(rest[0]) && unitSign(rest[1]) {
		i++
	}
	if i >= len(rest) || !unitSign(rest[i]) {
		return false
	}
	after := rest[i+1:]
	if len(after) > 2 {
		return false
	}
	for _, r := range after {
		if !asciiLetter(r) && !unitSign(r) {
			return false
		}
	}
	return true
}

// hostOrIdentifier reports whether name is shaped as a host, an e-mail
// address or an identifier, not as a word of prose: a dot (or a dot-like
// full stop) before a label of two letters or more (a top-level domain:
// аррӏе.со, not the е.а of an abbreviation), or an underscore.
func hostOrIdentifier(name string) bool {
	if strings.Contains(name, "_") {
		return true
	}
	// A command's path, an option or an address: /ԁеν/ѕԁа, ѕһеӏӏ-ехес,
	// раураӏ@со (R8): two parts of two letters or more. Russian
	// hyphenated words (кто-то) hold letters that pass for no Latin one;
	// р/с and ТОР-10 have one such part.
	for _, sep := range []string{"/", "-", "@"} {
		parts := strings.Split(name, sep)
		if len(parts) < 2 {
			continue
		}
		long := 0
		for _, p := range parts {
			letters := 0
			for _, r := range p {
				if unicode.IsLetter(r) {
					letters++
				}
			}
			if letters >= 2 {
				long++
			}
		}
		if long >= 2 {
			return true
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		if r != '.' && !lookAlikeDot(r) {
			continue
		}
		letters := 0
		for _, next := range rs[i+1:] {
			if nameJoiner(next) {
				break
			}
			if unicode.IsLetter(next) {
				letters++
			}
		}
		if letters >= 2 {
			return true
		}
	}
	return false
}

// wordCount is how the runes of one word of a name count (lookAlike).
type wordCount struct {
	// unit: the word is a quantity's unit, its μ or Ω no look-alike.
	unit bool
	// latin counts plain Latin letters, asciiDigits ASCII digits, likes
	// look-alikes (classify), styled and otherDigits those that are
	// styled letters and digits of other scripts, letters all letters.
	latin, asciiDigits, likes, styled, otherDigits, letters int
	// passes: every look-alike letter passes for Latin and no letter is
	// of a script that does not (пример holds п, м, и).
	passes bool
	// styledPasses: a styled letter passes for a Latin one; typography:
	// every styled letter is fullwidth or a Roman numeral; cjk: the word
	// holds Chinese, Japanese or Korean letters.
	styledPasses, typography, cjk bool
	// capitals: every styled letter is a fullwidth capital or a Roman
	// numeral (ＵＳＢ).
	capitals bool
	// fullwidthDigits counts fullwidth digits (among otherDigits);
	// letterAfterDigit: a letter follows one (g００gle, not Windows１１).
	fullwidthDigits  int
	letterAfterDigit bool
	// script is the script of the word's last look-alike letter; scripts:
	// they come from two scripts or more (ѕսԁо, Cyrillic and Armenian),
	// which no word of prose does.
	script  string
	scripts bool
}

// countWord counts the runes of w, a word; unit is whether it is a unit,
// plainModifiers whether superscript and subscript letters are plain
// Latin ones in it (modifierLetters: in prose).
func countWord(w string, unit, plainModifiers bool) wordCount {
	n := wordCount{unit: unit, passes: true, typography: true, capitals: true}
	for _, r := range w {
		c, ok := classify(r)
		switch {
		case unit && unitSign(r):
			continue
		case plainLatin(r) || plainModifiers && modifierLetter(r):
			n.latin++
		case r >= '0' && r <= '9':
			n.asciiDigits++
		case ok:
			n.likes++
			// A digit with no Latin twin (१) neither makes the word pass
			// nor keeps it from passing: аррӏе१.com is still a spoof.
			n.passes = n.passes && (c.passes || c.digit)
			if c.styled {
				n.styled++
				n.styledPasses = n.styledPasses || c.passes
				n.typography = n.typography && fullwidthOrRoman(r)
				n.capitals = n.capitals && (r >= 0xFF21 && r <= 0xFF3A || r >= 0x2160 && r <= 0x217F)
			}
			if c.digit {
				n.otherDigits++
			}
			if r >= '０' && r <= '９' {
				n.fullwidthDigits++
			}
			if c.script != "" && n.script != "" && c.script != n.script {
				n.scripts = true
			}
			if c.script != "" {
				n.script = c.script
			}
		case unicode.IsLetter(r):
			n.passes = false
			n.cjk = n.cjk || cjk(r)
		}
		if c.letter || unicode.IsLetter(r) {
			n.letters++
			n.letterAfterDigit = n.letterAfterDigit || n.fullwidthDigits > 0
		}
	}
	return n
}

// lookAlike judges one name (see LookAlikes); afterNumber is whether it
// follows a number and a space.
func lookAlike(name string, afterNumber bool) (Name, bool) {
	if ascii(name) {
		// No look-alike character: only where it leads can deceive.
		l := Name{Text: name, Kind: nameKind(name)}
		if !l.locate() {
			return Name{}, false
		}
		return l, true
	}
	words := strings.FieldsFunc(name, nameJoiner)
	counts := make([]wordCount, len(words))
	kind := nameKind(name)
	plainModifiers := kind == "name"
	latinInName, asciiDigitInName, allPass := false, false, true
	for i, w := range words {
		counts[i] = countWord(w, unit(w, afterNumber && i == 0), plainModifiers)
		latinInName = latinInName || counts[i].latin > 0
		asciiDigitInName = asciiDigitInName || counts[i].asciiDigits > 0
		allPass = allPass && counts[i].passes
	}
	// The whole name passes for Latin: no Latin letter in it, and every
	// letter and digit looks like one, in the shape of a host or identifier.
	wholly := !latinInName && allPass && hostOrIdentifier(name)

	l := Name{Text: name, Kind: kind}
	// Fullwidth digits after a word's Latin letters or beside Chinese,
	// Japanese or Korean ones (Windows１１, iPhone１５, 第１回meeting) are
	// typography, as fullwidth capitals standing alone are: a word of prose
	// as it reads. In a host, path, address or identifier (deploy_v２) they
	// pass for the ASCII digits they are not. Judged once per name: its
	// words are as many as the agent likes.
	digitTypography := l.Kind == "name" &&
		slices.ContainsFunc(counts, func(n wordCount) bool { return n.fullwidthDigits > 0 }) &&
		!hostOrIdentifier(name)
	var scripts, digits []string
	for i, w := range words {
		n := counts[i]
		if n.likes == 0 {
			continue
		}
		mixed := n.latin > 0 || n.asciiDigits > 0 && n.otherDigits > 0
		if digitTypography && n.fullwidthDigits == n.likes && n.asciiDigits == 0 && (n.cjk || n.latin > 0 && !n.letterAfterDigit) {
			continue
		}
		// Fullwidth letters and Roman numerals are typography beside
		// Chinese, Japanese or Korean letters, and so are fullwidth capitals
		// in a word standing alone (ＵＳＢ, ＯＫ in Japanese text); beside
		// Latin letters or in a host or address they pass for what they are
		// not.
		styledWord := n.styled > 0 && n.styledPasses && n.letters > 1 &&
			!(n.typography && (n.cjk || n.capitals && !latinInName && l.Kind == "name"))
		// Digits of another script that pass for ASCII ones beside ASCII
		// digits elsewhere (１０.0.0.1) are as much a spoof as letters
		// beside Latin ones; letters beside digits alone are not (ТОР-10 is
		// Russian).
		spoof := n.latin == 0 && n.passes && (latinInName || wholly || n.scripts || asciiDigitInName && n.otherDigits == n.likes)
		if !mixed && !styledWord && !spoof {
			continue
		}
		for _, r := range w {
			c, ok := classify(r)
			if !ok || n.unit && unitSign(r) || plainModifiers && modifierLetter(r) {
				continue
			}
			if !slices.Contains(l.Characters, r) {
				l.Characters = append(l.Characters, r)
			}
			switch {
			case c.styled:
				l.Styled = true
			case c.digit:
				d, _ := digitOf(r)
				if label := runLabel(d.run); !slices.Contains(digits, label) {
					digits = append(digits, label)
				}
			case !slices.Contains(scripts, c.script):
				scripts = append(scripts, c.script)
			}
		}
	}
	// Punctuation that passes for a path's, an address's or a host's is a
	// spoof where the name has Latin letters for it to join
	// (paypal.com∕login); between digits alone it is a fraction (1⁄2), and
	// fullwidth punctuation beside Chinese, Japanese or Korean letters is
	// their typography.
	if latinInName {
		cjkName := strings.IndexFunc(name, cjk) >= 0
		for _, r := range name {
			if _, ok := lookAlikePunctuation[r]; !ok || cjkName && r >= 0xFF00 && r <= 0xFFEF {
				continue
			}
			l.Punctuation = true
			if !slices.Contains(l.Characters, r) {
				l.Characters = append(l.Characters, r)
			}
		}
	}
	for _, r := range strayMarks(name) {
		l.Marks = true
		if !slices.Contains(l.Characters, r) {
			l.Characters = append(l.Characters, r)
		}
	}
	if !l.locate() && len(l.Characters) == 0 {
		return Name{}, false
	}
	if latinInName {
		scripts = append([]string{"Latin"}, scripts...)
	} else if asciiDigitInName && len(digits) > 0 {
		digits = append([]string{"ASCII"}, digits...)
	}
	l.Scripts, l.Digits = scripts, digits
	l.ASCII = asciiHost(name, l.Kind)
	return l, true
}

// strayMarks are the combining marks in name that follow a Latin letter
// but do not compose with it (NFC): lı̇nkedin's dot above on a dotless i,
// drawn as an i (R8). The e and acute of a decomposed café compose to é,
// and are none. (From h-lookalike4.)
func strayMarks(name string) []rune {
	var marks []rune
	for i := 0; i < len(name); {
		base, size := utf8.DecodeRuneInString(name[i:])
		end := i + size
		for end < len(name) {
			m, n := utf8.DecodeRuneInString(name[end:])
			if !unicode.Is(unicode.Mn, m) {
				break
			}
			end += n
		}
		latin := base >= 'a' && base <= 'z' || base >= 'A' && base <= 'Z' || plainLatin(base)
		if end > i+size && latin && utf8.RuneCountInString(norm.NFC.String(name[i:end])) > 1 {
			for _, m := range name[i+size : end] {
				marks = append(marks, m)
			}
		}
		i = end
	}
	return marks
}

// dnsSized reports whether host is no longer than a DNS name may be (253
// characters, each label at most 63) and so has an ASCII form a resolver
// is asked for. It also bounds what punycode costs: encoding a label takes
// its length times its distinct characters, and an agent's 60 KB label of
// distinct Han characters took five seconds of CPU on every reviewer
// surface that showed the call.
func dnsSized(host string) bool {
	const maxName, maxLabel = 253, 63
	name, label := 0, 0
	for _, r := range host {
		if name++; name > maxName {
			return false
		}
		if r == '.' || lookAlikeDot(r) {
			label = 0
			continue
		}
		if label++; label > maxLabel {
			return false
		}
	}
	return true
}

// locate sets l's UserInfo and Host, Embedded and Domain, and reports
// whether it set any.
func (l *Name) locate() bool {
	l.UserInfo, l.Host = userInfo(l.Text, l.Kind)
	host, bare := hostOf(l.Text, l.Kind)
	l.Embedded, l.Domain = embeddedDomain(host, bare)
	return l.UserInfo != "" || l.Embedded != ""
}

// userInfo is Name.UserInfo and Host of a name of kind: a domain that an
// address's user-info (all before the last @ of its authority, any
// punctuation around it: paypal.com&login, paypal.com., paypal.com@,
// paypal.com%2F, paypal.com\) holds, and the host after that @ the client
// connects to. A path whose first segment is user@host before a / is an
// address without its scheme (curl paypal.com@evil.ru/login); an e-mail
// address on its own is no URL and is not judged. Me, oauth2:token and
// first.last hold no domain (readsAsDomain, under any top-level domain:
// no one names a user after a domain but to deceive).
func userInfo(name, kind string) (info, host string) {
	var authority string
	switch kind {
	case "address":
		authority = authorityOf(name)
	case "path":
		first, _, ok := strings.Cut(name, "/")
		if !ok || !strings.Contains(first, "@") {
			return "", ""
		}
		authority = first
	default:
		return "", ""
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return "", ""
	}
	host = hostAfterAt(authority[at+1:])
	if host == "" || kind == "path" && !realHost(host) {
		return "", ""
	}
	if info = domainIn(authority[:at]); info == "" {
		return "", ""
	}
	return info, host
}

// domainIn is the first dotted name in a URL's user-info, percent-decoded
// and cut at ASCII punctuation other than . and -, that reads as a domain
// (readsAsDomain), as written; else "".
func domainIn(userInfo string) string {
	if !dnsSized(userInfo) {
		return ""
	}
	decoded := percentDecoded(userInfo)
	for _, run := range strings.FieldsFunc(decoded, func(r rune) bool {
		return r < utf8.RuneSelf && !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-')
	}) {
		run = strings.Trim(run, ".-")
		if _, ok := readsAsDomain(lowerDotted(run), true); ok {
			return run
		}
	}
	return ""
}

// hostAfterAt is the host of what follows an authority's last @: without
// a port, a trailing dot, or what follows a backslash (https://a\@b/ is
// b's to curl and Python, a's to browsers).
func hostAfterAt(rest string) string {
	if i := strings.IndexByte(rest, '\\'); i >= 0 {
		rest = rest[:i]
	}
	return strings.TrimSuffix(withoutPort(rest), ".")
}

// realHost reports whether host is a dotted name under a real top-level
// domain of ICANN's or an IP address: what a scheme-less argument must
// name to be taken for an address (github.com:org is a git remote's).
func realHost(host string) bool {
	h := lowerDotted(host)
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return true
	}
	dot := strings.LastIndex(h, ".")
	if dot < 0 {
		return false
	}
	tld := h[dot+1:]
	s, icann := icannSuffix(tld)
	return icann && s == tld
}

// percentDecoded is s with its %XX escapes decoded (paypal.com%2eevil.ru
// is paypal.com.evil.ru to a browser's host parser); invalid ones stay.
func percentDecoded(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	unhex := func(c byte) (byte, bool) {
		switch {
		case c >= '0' && c <= '9':
			return c - '0', true
		case c >= 'a' && c <= 'f':
			return c - 'a' + 10, true
		case c >= 'A' && c <= 'F':
			return c - 'A' + 10, true
		}
		return 0, false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// embeddedDomain is Name.Embedded and Domain of host: the last domain
// that the labels in front of host's registrable domain read as when cut
// at a dot or a hyphen (readsAsDomain, embeddedReadsAsDomain: google.com
// in accounts.google.com.evil.example, paypal.com in
// paypal.com-login.evil.example and paypal.com-login.ru, ghcr.io in
// ghcr.io.evil.com), and the registrable domain whose owner owns the host
// (under every public suffix, the hosting companies' too: evil.example,
// com.github.io for paypal.com.github.io, whose tenant is "com"). The
// host is read as a browser reads it: %2e is a dot, a trailing dot none.
// bare is whether host is a dotted name on its own, which is a host only
// when it ends in a real top-level domain (example.com.conf is a file
// name). Bounded: a host longer than a DNS name has no domain, and each
// of its at most 253 cuts costs a public-suffix lookup.
func embeddedDomain(host string, bare bool) (embedded, domain string) {
	if host == "" {
		return "", ""
	}
	h := strings.TrimSuffix(lowerDotted(percentDecoded(host)), ".")
	// Cheap before the public suffix list: a domain in front of another
	// takes two dots.
	if strings.Count(h, ".") < 2 || !dnsSized(h) {
		return "", ""
	}
	// An IP address ends in a digit (IPv4) or holds a colon (IPv6).
	if last := h[len(h)-1]; last >= '0' && last <= '9' || strings.Contains(h, ":") {
		if _, err := netip.ParseAddr(h); err == nil {
			return "", ""
		}
	}
	suffix, _ := icannSuffix(h)
	front, ok := strings.CutSuffix(h, "."+suffix)
	if !ok {
		return "", ""
	}
	if bare {
		tld := h[strings.LastIndex(h, ".")+1:]
		if s, icann := icannSuffix(tld); !icann || s != tld {
			return "", ""
		}
	}
	lastDot := strings.LastIndex(front, ".")
	if lastDot < 0 {
		return "", "" // nothing in front of the registrable domain
	}
	registered := h[lastDot+1:]
	for i, label := 0, 0; i < len(front); i++ {
		if front[i] != '.' && front[i] != '-' {
			continue
		}
		// Only a top-level domain's shape before the cut sends it to the
		// public suffix list: most cuts of an agent's names end in no such
		// label, and each lookup costs.
		tld := tldShaped(front[label:i])
		if front[i] == '.' {
			label = i + 1
		}
		if !tld {
			continue
		}
		// A hyphen within the registered label joins a domain to it
		// (paypal.com-login.ru) unless what stands before is a host's
		// service label (www.net-a-porter.com is Net-a-Porter's).
		if i > lastDot && (front[i] != '-' || serviceLabels[front[strings.LastIndex(front[:lastDot], ".")+1:lastDot]]) {
			continue
		}
		if d, ok := embeddedReadsAsDomain(h, i); ok && d != registered {
			embedded = d
		}
	}
	if embedded == "" {
		return "", ""
	}
	if domain, _ = publicsuffix.EffectiveTLDPlusOne(h); domain == "" {
		domain = registered
	}
	return embedded, domain
}

// serviceLabels name a service of a site, not a domain, before the label
// that follows them: www.net-a-porter.com is not net's.
var serviceLabels = map[string]bool{"www": true, "m": true, "mail": true, "web": true, "api": true, "app": true, "my": true, "shop": true, "blog": true}

// regionLabels are two-letter labels that name a region or country of a
// site in front of its domain (tenant.us.auth0.com, ingest.de.sentry.io,
// ec2.eu-west-1.amazonaws.com), not a country's domain.
var regionLabels = map[string]bool{
	"us": true, "eu": true, "uk": true, "gb": true, "de": true, "fr": true, "jp": true, "au": true, "in": true,
	"br": true, "ca": true, "sg": true, "kr": true, "cn": true, "hk": true, "tw": true, "ch": true, "se": true,
	"nl": true, "it": true, "es": true, "ie": true, "me": true, "sa": true, "za": true, "af": true, "il": true,
	"no": true, "dk": true, "fi": true, "pl": true, "at": true, "be": true, "nz": true, "mx": true, "ae": true,
}

// embeddedReadsAsDomain is the domain the cut h[:i] of a host reads as
// (readsAsDomain), and whether it reads as one in front of another: under
// a generic top-level domain, a suffix of two labels (co.uk) or a
// two-letter country code no region is named by (ghcr.io.evil.com). A
// word domain there is as often an environment or a service of the site
// (api.dev.example.com, api.staging.app.example.com) as a domain
// (pkg.go.dev.evil.com), and tenant.us.auth0.com's us is a region.
func embeddedReadsAsDomain(h string, i int) (string, bool) {
	d, ok := readsAsDomain(h[:i], true)
	if !ok {
		return "", false
	}
	suffix := d[strings.IndexByte(d, '.')+1:]
	return d, genericTLDs[suffix] || strings.Contains(suffix, ".") || len(suffix) == 2 && !regionLabels[suffix]
}

// tldShaped reports whether label may be a top-level domain: 2 to 63
// letters, or an IDNA label (xn--).
func tldShaped(label string) bool {
	if len(label) < 2 || len(label) > 63 {
		return false
	}
	if strings.HasPrefix(label, "xn--") {
		return true
	}
	for i := 0; i < len(label); i++ {
		if label[i] < 'a' || label[i] > 'z' {
			return false
		}
	}
	return true
}

// icannSuffix is name's public suffix under ICANN's rules of Go's list
// (com, co.uk), and whether ICANN's rules know it: the list's private
// suffixes (github.io, netlify.app, s3.amazonaws.com) are where anyone
// may name a host, paypal.com.github.io too, so a host under one belongs
// to the domain of the hosting company (github.io).
func icannSuffix(name string) (string, bool) {
	suffix, icann := publicsuffix.PublicSuffix(name)
	for !icann {
		_, rest, ok := strings.Cut(suffix, ".")
		if !ok {
			break
		}
		suffix, icann = publicsuffix.PublicSuffix(rest)
	}
	return suffix, icann
}

// genericTLDs are the top-level domains a reader takes for the end of a
// host wherever they stand: com, net, org and their kin. A country code
// or a newer word-like domain in front of a registrable domain is as
// often a region or an environment of the site (tenant.us.auth0.com,
// ingest.de.sentry.io, api.dev.example.com) and is not read as a domain.
var genericTLDs = map[string]bool{"com": true, "net": true, "org": true, "edu": true, "gov": true, "mil": true, "info": true, "biz": true}

// readsAsDomain is the domain name (lowercase, dotted) reads as, a label
// before a public suffix of ICANN's (Go's list), and whether it reads as
// one: the suffix is a generic top-level domain (genericTLDs) or has
// labels of its own (co.uk, com.au), or any is set (a user name).
func readsAsDomain(name string, any bool) (string, bool) {
	suffix, icann := icannSuffix(name)
	before, ok := strings.CutSuffix(name, "."+suffix)
	if !icann || !ok || before == "" || !(any || genericTLDs[suffix] || strings.Contains(suffix, ".")) {
		return "", false
	}
	return before[strings.LastIndex(before, ".")+1:] + "." + suffix, true
}

// lowerDotted is a host with ASCII capitals made small and full stops
// that browsers read as dots (lookAlikeDot) made dots, as the public
// suffix list spells names.
func lowerDotted(host string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case lookAlikeDot(r):
			return '.'
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return r
	}, host)
}

// nameKind is Name.Kind of a name.
func nameKind(name string) string {
	switch {
	case strings.Contains(name, "://"):
		return "address"
	case strings.ContainsAny(name, `/\`):
		return "path"
	case strings.Contains(name, "@"):
		return "e-mail address"
	case strings.Contains(name, ".") || strings.IndexFunc(name, lookAlikeDot) >= 0:
		return "host"
	}
	return "name"
}

// asciiHost is Name.ASCII of a name of kind: the host of an address
// (between :// and the path, without user or port), of an e-mail address
// (after the @) or the name itself for a host, in the ASCII form IDNA's
// lookup gives it (what net/http asks a resolver for: ｐａｙｐａｌ．com is
// paypal.com), else its plain punycode; "" when that is the host itself
// or it has none.
func asciiHost(name, kind string) string {
	host, _ := hostOf(name, kind)
	if kind == "path" || host == "" || ascii(host) || !dnsSized(host) {
		return ""
	}
	a, err := idna.Lookup.ToASCII(host)
	if err != nil {
		if a, err = idna.Punycode.ToASCII(host); err != nil {
			return ""
		}
	}
	if a == host {
		return ""
	}
	return a
}

// hostOf is the host a name of kind names: of an address (between ://
// and the path, without user or port), of an e-mail address (after the
// @), the name itself for a host, or the first segment of a path that
// starts with a dotted name (docs.example.com/x, an address without its
// scheme); else "". bare is whether it is a dotted name on its own or a
// path's segment, not marked as a host by :// or @.
func hostOf(name, kind string) (host string, bare bool) {
	switch kind {
	case "address":
		authority := authorityOf(name)
		return hostAfterAt(authority[strings.LastIndex(authority, "@")+1:]), false
	case "e-mail address":
		return hostAfterAt(name[strings.LastIndex(name, "@")+1:]), false
	case "host":
		return withoutPort(name), true
	case "path":
		first, _, _ := strings.Cut(name, "/")
		if strings.ContainsAny(first, `\:@~`) || strings.HasPrefix(first, ".") || !strings.Contains(first, ".") {
			return "", false
		}
		return first, true
	}
	return "", false
}

// authorityOf is what an address holds between :// and its path, query
// or fragment: its user, host and port. A backslash before an @ is the
// user's to curl and Python (hostAfterAt), so it ends nothing here.
func authorityOf(address string) string {
	authority := address[strings.Index(address, "://")+len("://"):]
	if i := strings.IndexAny(authority, `/?#`); i >= 0 {
		authority = authority[:i]
	}
	return authority
}

// withoutPort is host without a :port after it.
func withoutPort(host string) string {
	if i := strings.LastIndex(host, ":"); i >= 0 && strings.Trim(host[i+1:], "0123456789") == "" {
		return host[:i]
	}
	return host
}

// andList joins words as a sentence does: "a", "a and b", "a, b and c".
func andList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
