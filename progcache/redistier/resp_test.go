package redistier

import (
	"errors"
	"strings"
	"testing"
)

// respCases are streams and whether a scanner with limit 1000 accepts
// them whole. A refused one must be refused before the line feed of the
// header that goes over (refusedBefore: the header's text).
var respCases = []struct {
	name, stream string
	refusedAt    string // "" when accepted; else the header refused
}{
	{"status", "+OK\r\n", ""},
	{"error", "-ERR unknown command 'HELLO'\r\n", ""},
	{"int, null, bool, double, bignum", ":12\r\n_\r\n#t\r\n,1.5\r\n(3492890328409238509324850943850943825024385\r\n", ""},
	{"bulk", "$5\r\nhello\r\n", ""},
	{"empty and null bulk", "$0\r\n\r\n$-1\r\n*-1\r\n", ""},
	{"bulk with CRLF inside", "$4\r\n\r\n\r\n\r\n+OK\r\n", ""},
	{"blob error", "!21\r\nSYNTAX invalid syntax\r\n", ""},
	{"verbatim", "=15\r\ntxt:Some string\r\n", ""},
	{"array of bulks", "*2\r\n$3\r\nfoo\r\n$3\r\nbar\r\n", ""},
	{"nested", "*2\r\n*1\r\n:1\r\n%1\r\n+k\r\n~2\r\n:1\r\n:2\r\n", ""},
	{"hello map", "%2\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n", ""},
	{"attribute before a reply", "|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*2\r\n:1\r\n:2\r\n", ""},
	{"attribute inside an array", "*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n", ""},
	{"push", ">3\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nkey\r\n_\r\n", ""},
	{"streamed string", "$?\r\n;4\r\nHell\r\n;1\r\no\r\n;0\r\n+OK\r\n", ""},
	{"streamed aggregate", "*?\r\n:1\r\n$2\r\nab\r\n.\r\n%?\r\n+a\r\n:1\r\n.\r\n", ""},
	{"each reply has its own limit", strings.Repeat("$900\r\n"+strings.Repeat("x", 900)+"\r\n", 3), ""},

	{"huge bulk", "$100000000000\r\n", "$100000000000"},
	{"bulk over the limit", "$1001\r\n", "$1001"},
	{"huge blob error", "!100000000000\r\n", "!100000000000"},
	{"huge verbatim", "=100000000000\r\n", "=100000000000"},
	{"huge array", "*100000000000\r\n", "*100000000000"},
	{"huge map", "%100000000000\r\n", "%100000000000"},
	{"huge set", "~100000000000\r\n", "~100000000000"},
	{"huge push", ">100000000000\r\n", ">100000000000"},
	{"huge attribute", "|100000000000\r\n", "|100000000000"},
	{"array of 63", "*63\r\n", "*63"}, // 63*16 + 5 > 1000
	{"map of 32 pairs", "%32\r\n", "%32"},
	{"many small arrays add up", "*2\r\n*30\r\n" + strings.Repeat(":1\r\n", 30) + "*30\r\n", "*30\r\n" + strings.Repeat(":1\r\n", 30) + "*30"},
	{"bulks in one array add up", "*2\r\n$600\r\n" + strings.Repeat("x", 600) + "\r\n$600\r\n", "$600\r\n" + strings.Repeat("x", 600) + "\r\n$600"},
	{"huge streamed chunk", "$?\r\n;100000000000\r\n", ";100000000000"},
	{"length past int64", "$99999999999999999999\r\n", "$99999999999999999999"},
	{"negative length", "$-2\r\n", "$-2"},
	{"length not a number", "*1x\r\n", "*1x"},
	{"unknown type", "@5\r\n", ""},
	{"chunk outside a streamed string", ";5\r\n", ";5"},
	{"end outside a streamed aggregate", ".\r\n", "."},
	{"nested too deep", strings.Repeat("*1\r\n", maxDepth+1), strings.Repeat("*1\r\n", maxDepth) + "*1"},
}

func TestRESPScanner(t *testing.T) {
	for _, tc := range respCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, step := range []int{len(tc.stream), 1, 3, 7} {
				if step == 0 {
					continue
				}
				s := respScanner{limit: 1000}
				if tc.name == "nested too deep" {
					s.limit = 1 << 20
				}
				delivered, err := feed(&s, []byte(tc.stream), step)
				switch {
				case tc.refusedAt == "" && tc.name != "unknown type":
					if err != nil || delivered != len(tc.stream) {
						t.Fatalf("in steps of %d: delivered %d of %d bytes, %v; want all, accepted", step, delivered, len(tc.stream), err)
					}
				case !errors.Is(err, ErrReplyTooLarge):
					t.Fatalf("in steps of %d: %v, want ErrReplyTooLarge", step, err)
				case tc.refusedAt != "":
					// The refused header's line feed never reaches go-redis.
					end := strings.Index(tc.stream, tc.refusedAt) + len(tc.refusedAt)
					if delivered > end+1 || strings.Contains(tc.stream[:delivered], tc.refusedAt+"\r\n") {
						t.Fatalf("in steps of %d: delivered %q, which completes the refused header %q", step, tc.stream[:delivered], tc.refusedAt)
					}
				}
			}
		})
	}
}

// feed scans stream in pieces of step bytes, as reads would arrive, and
// returns how many bytes the scanner let through before its error.
func feed(s *respScanner, stream []byte, step int) (int, error) {
	delivered := 0
	for off := 0; off < len(stream); off += step {
		p := stream[off:min(off+step, len(stream))]
		n, err := s.scan(p)
		delivered += n
		if err != nil {
			return delivered, err
		}
		if n != len(p) {
			return delivered, errors.New("scan returned short without an error")
		}
	}
	return delivered, nil
}

// FuzzRESPScanner: whatever the stream and however it is split, the
// scanner never panics, decides the same, and never lets through a
// complete header that declares more than the limit.
func FuzzRESPScanner(f *testing.F) {
	for _, tc := range respCases {
		f.Add([]byte(tc.stream), uint16(1000), uint8(3))
	}
	f.Add([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"), uint16(64), uint8(1))
	f.Fuzz(func(t *testing.T, stream []byte, limit uint16, step uint8) {
		whole := respScanner{limit: int64(limit)}
		n1, err1 := feed(&whole, stream, max(len(stream), 1))
		split := respScanner{limit: int64(limit)}
		n2, err2 := feed(&split, stream, int(step%16)+1)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("whole: %d, %v; in steps of %d: %d, %v", n1, err1, step%16+1, n2, err2)
		}
		if err1 == nil && (n1 != len(stream) || n2 != len(stream)) {
			t.Fatalf("accepted but delivered %d and %d of %d bytes", n1, n2, len(stream))
		}
		checkDelivered(t, stream[:n1], int64(limit))
		checkDelivered(t, stream[:n2], int64(limit))
	})
}

// checkDelivered re-scans what was let through with a fresh scanner: it
// must be accepted whole (the scanner refuses only at the header that goes
// over, so everything before it was within the limit).
func checkDelivered(t *testing.T, p []byte, limit int64) {
	t.Helper()
	s := respScanner{limit: limit}
	if n, err := s.scan(p); err != nil || n != len(p) {
		t.Fatalf("what the scanner let through (%q) is refused when scanned again: %d, %v", p, n, err)
	}
}
