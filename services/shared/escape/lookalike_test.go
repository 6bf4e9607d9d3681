package escape_test

import (
	"reflect"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/escape"
)

func TestLookAlikesFindsNamesThatPassForLatin(t *testing.T) {
	type found struct {
		text, kind string
		scripts    []string
		letters    string
	}
	for _, tt := range []struct {
		name, in string
		want     []found
	}{
		{"a_host_with_a_cyrillic_a", "fetch https://docs.example/ then pаypal.com.", []found{{"pаypal.com", "host", []string{"Latin", "Cyrillic"}, "а"}}},
		{"a_path_with_cyrillic_letters", "/etc/раsswd", []found{{"/etc/раsswd", "path", []string{"Latin", "Cyrillic"}, "ра"}}},
		{"an_address", "https://gіthub.com/x", []found{{"https://gіthub.com/x", "address", []string{"Latin", "Cyrillic"}, "і"}}},
		{"a_tool_name_with_a_greek_omicron", "delete_repο", []found{{"delete_repο", "name", []string{"Latin", "Greek"}, "ο"}}},
		{"armenian_and_cherokee_in_one_word", "gօᏀgle", []found{{"gօᏀgle", "name", []string{"Latin", "Armenian", "Cherokee"}, "օᏀ"}}},
		{"a_wholly_cyrillic_label_in_a_latin_host", "аррӏе.com", []found{{"аррӏе.com", "host", []string{"Latin", "Cyrillic"}, "арӏе"}}},
		{"a_mixed_word_names_letters_with_no_latin_twin", "bжd", []found{{"bжd", "name", []string{"Latin", "Cyrillic"}, "ж"}}},
		{"a_zero_width_space_does_not_split_a_name", "p\u200bа\u200bypal", []found{{"p\u200bа\u200bypal", "name", []string{"Latin", "Cyrillic"}, "а"}}},
		{"each_name_once", "pаypal pаypal", []found{{"pаypal", "name", []string{"Latin", "Cyrillic"}, "а"}}},
		{"a_latin_alpha_in_a_host", "https://pɑypal.com/login", []found{{"https://pɑypal.com/login", "address", []string{"Latin", "phonetic Latin"}, "ɑ"}}},
		{"a_script_g_in_a_host", "ɡoogle.com", []found{{"ɡoogle.com", "host", []string{"Latin", "phonetic Latin"}, "ɡ"}}},
		{"a_fullwidth_full_stop_joins_a_spoofed_label_to_its_latin_one", "аррӏе．com", []found{{"аррӏе．com", "host", []string{"Latin", "Cyrillic"}, "арӏе"}}},
		{"an_ideographic_full_stop_too", "аррӏе。com", []found{{"аррӏе。com", "host", []string{"Latin", "Cyrillic"}, "арӏе"}}},
		{"a_greek_lunate_sigma_in_a_wholly_look_alike_label", "ѕϲоре.com", []found{{"ѕϲоре.com", "host", []string{"Latin", "Cyrillic", "Greek"}, "ѕϲоре"}}},
		{"units_after_a_number_are_not_spoofs", "a 4.7kΩ resistor and 10μm film", nil},
		{"a_turkish_dotless_i_is_an_ordinary_letter", "kapı açık", nil},
		{"pure_latin", "rm -rf /tmp/build && curl https://paypal.com/ café naïve", nil},
		{"a_cyrillic_sentence", "Привет, мир! Удалить файл отчёт.pdf?", nil},
		{"a_cyrillic_host", "пример.рф", nil},
		{"a_cyrillic_label_that_does_not_pass_for_latin", "пример.com", nil},
		{"a_greek_sentence", "Καλημέρα κόσμε", nil},
		{"cjk_and_latin", "東京 Tokyo Tシャツ 東京tower", nil},
		{"digits_and_punctuation", "123-456 (789) 3.14 #!/bin/sh", nil},
		{"a_cyrillic_word_beside_latin_words", "сор is Russian for nothing", nil},
		{"empty", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []found
			for _, l := range escape.LookAlikes(tt.in) {
				got = append(got, found{l.Text, l.Kind, l.Scripts, string(l.Letters)})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("LookAlikes(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestLookAlikeWarningSaysWhichLetterPassesForWhich(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"one_letter", "pаypal.com", "the host [pаypal.com] mixes Latin and Cyrillic letters: [а] (U+0430 CYRILLIC SMALL LETTER A) looks like a"},
		{"a_letter_with_no_latin_twin", "bжd", "the name [bжd] mixes Latin and Cyrillic letters: [ж] (U+0436, a Cyrillic letter)"},
		{"past_three_letters", "xаеорс", "the name [xаеорс] mixes Latin and Cyrillic letters: [а] (U+0430 CYRILLIC SMALL LETTER A) looks like a; [е] (U+0435 CYRILLIC SMALL LETTER IE) looks like e; [о] (U+043E CYRILLIC SMALL LETTER O) looks like o; and 2 more"},
		{"three_scripts", "gօᏀgle", "the name [gօᏀgle] mixes Latin, Armenian and Cherokee letters: [օ] (U+0585 ARMENIAN SMALL LETTER OH) looks like o; [Ꮐ] (U+13C0 CHEROKEE LETTER NAH) looks like G"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ls := escape.LookAlikes(tt.in)
			if len(ls) != 1 {
				t.Fatalf("LookAlikes(%q) = %+v, want one", tt.in, ls)
			}
			if got := ls[0].Warning(func(s string) string { return "[" + s + "]" }); got != tt.want {
				t.Fatalf("Warning = %q, want %q", got, tt.want)
			}
		})
	}
}
